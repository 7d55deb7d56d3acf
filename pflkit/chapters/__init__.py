"""What a chapter of the book computes beside its runs: probes that read a method's internals
during a run, and the measurements the chapter's claims rest on.  One module per chapter; the
methods never import these (they are the book's, not the algorithms')."""
