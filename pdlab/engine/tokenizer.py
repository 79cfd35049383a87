"""A byte-level tokenizer: text prompts become ids with no download.

Ids 0..255 are the UTF-8 bytes; 256 is BOS and 257 is EOS (the tiny model's vocabulary is
258). It plays the role of the HF tokenizer vLLM loads in ``vllm/transformers_utils``.

Bytes that do not form valid UTF-8 (a random model emits plenty; a generation cut inside a
Chinese character leaves one or two) are written ``\\xNN``, the way Python's
``backslashreplace`` writes them: in ``decode``, so in every ``RequestOutput.text``, and in
:func:`printable`, the one form every view shows output in.
"""

from __future__ import annotations

BOS_TOKEN_ID = 256
EOS_TOKEN_ID = 257


class ByteTokenizer:
    vocab_size = 258
    bos_token_id = BOS_TOKEN_ID
    eos_token_id = EOS_TOKEN_ID

    def encode(self, text: str, add_bos: bool = False) -> list[int]:
        if not isinstance(text, str):
            raise ValueError(f"text must be a str; got {type(text).__name__}")
        ids = list(text.encode("utf-8"))
        return [BOS_TOKEN_ID, *ids] if add_bos else ids

    def decode(self, ids: list[int]) -> str:
        """Bytes that are not valid UTF-8 become ``\\xNN``; special ids become
        ``<bos>``/``<eos>``; ids beyond the vocabulary become ``<id>``."""
        out, buf = [], bytearray()
        for i in ids:
            if 0 <= i < 256:
                buf.append(i)
                continue
            out.append(buf.decode("utf-8", errors="backslashreplace"))
            buf = bytearray()
            out.append({BOS_TOKEN_ID: "<bos>", EOS_TOKEN_ID: "<eos>"}.get(i, f"<{i}>"))
        out.append(buf.decode("utf-8", errors="backslashreplace"))
        return "".join(out)


def encode(text: str) -> list[int]:
    return ByteTokenizer().encode(text)


def decode(ids: list[int]) -> str:
    return ByteTokenizer().decode(ids)


def printable(ids: list[int], quote: bool = True) -> str:
    """Token ids as every view shows them, on one line: the text they spell, each byte that
    is not valid UTF-8 as ``\\xNN``, newline and tab as ``\\n`` and ``\\t``, other control
    characters as ``\\xNN``; in single quotes unless ``quote`` is False."""
    out = []
    for ch in decode(list(ids)):
        if ch in "\n\t":
            out.append(ch.encode("unicode_escape").decode("ascii"))
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    body = "".join(out)
    return f"'{body}'" if quote else body
