"""Verification of an erase: decode every file under a table and its index root and find the
erased keys in any form (:mod:`.residue`: the scan and its report; :mod:`.needles`: the values'
encodings and matching; :mod:`.decoders`: files by content, with the formats' bookkeeping rules;
:mod:`.avro`: Avro containers)."""
