"""The write contract (:mod:`.contract`) and what every format's writer shares: the rewrite of
a data file without some rows (:mod:`.rewrite`), and the purge's report, pause points and
records (:mod:`.history`, :mod:`.purge_record`)."""
