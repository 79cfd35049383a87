"""The stubs in Chinese: the same code as ``stubs/``, with the docstrings and comments a
Chinese learner reads in Chinese (vLLM identifiers stay as they are; terms from
``docs/glossary.md``). ``pdlab exercises --lang zh start N`` writes these."""
