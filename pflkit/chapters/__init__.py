"""What a chapter of the book computes beside its runs: probes that read a method's internals
during a run, and the measurements the chapter's claims rest on.  One module per chapter, or for a
long chapter one module per job: its experiment (``fedmn.py``: configs, arms, probes, sweeps, seed
plans, measurements), its claims where they need a module of their own (``fedmn_claims.py``) and
what only its page says (``fedmn_page.py``: tables, sentences, figures, setup card), each importing
only the ones before it.  The methods never import these (they are the book's, not the algorithms')."""
