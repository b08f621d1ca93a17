"""GPT-2's byte-level alphabet, shared by the tokenizer writers of the fixtures and the trainer."""


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable unicode character map."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) +
          list(range(ord("\xae"), ord("\xff") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))
