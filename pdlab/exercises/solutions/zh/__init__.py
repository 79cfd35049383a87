"""The reference solutions in Chinese: the same code as ``solutions/``, with the comments a
Chinese learner reads in Chinese (vLLM identifiers stay as they are; terms from
``docs/glossary.md``). ``pdlab exercises --lang zh solution N`` shows these."""
