"""The toolkit every protocol package builds on, one module per concern. Plain Python, no Django.

- ``bootstrap``: how many resamples an interval draws (N_BOOT) and how it is read (percentile_ci);
- ``matrix``: the integer item matrix a scored answer set is (ItemMatrix), exact printing, the bootstrap;
- ``items``: what scoring reads (ScoringItem, ModelAnswer) and the option-order mapping;
- ``answers``: the parsers of every answer kind (``Protocol.answer_kind``) and ``parse_answer``;
- ``prompting``: what a protocol's prompts are made of (ItemInput, PreparedQuery, the message
  helpers) and the query a backend answers (ModelQuery, ModelReply).
- ``pairwise``: ratings from pairwise votes (Bradley–Terry with Davidson ties, sandwich and
  bootstrap intervals, ranks by overlap, the flip count): docs/statistics.md.
- ``releases``: the authors' own file formats a protocol reads and writes (ReleaseFormat).

A protocol's own ``scoring.py`` and ``prompts.py`` import from here; the apps reach them through
the registry (protocols/registry.py).
"""
