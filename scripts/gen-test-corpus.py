#!/usr/bin/env python3
"""Generate the small test corpus of request-sim's real-text prompts (--prompt-corpus) into
request-sim/tests/data/corpus/: the same generated English-like prose as ShareGPT JSON
(sharegpt.json), JSONL with a "text" field (rows.jsonl) and plain text files (txt/*.txt).

The text is generated (no third-party text): sentences of common English words with the
things real text has and word prompts do not: capitals, punctuation, quotes, apostrophes,
digits, hyphens, parentheses and some non-ASCII letters. Deterministic (fixed seed), ~170 KB.

    python3 scripts/gen-test-corpus.py
"""
import json
import os
import random

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "request-sim", "tests", "data", "corpus")

WORDS = """the of and to in is was that for on with as by at from it this be are or an
which not have has had but were they their one all there can more when will would about
if out so what up into time them some could other than then its only new these two may
first way people like over also after did many most where made before must through back
years much your well should because each just those how too little state good very make
world still own see men work long get here between both life being under never day same
another know while last might us great old year off come since against go came right used
take three place small found part again home house water light river city road garden
morning evening winter summer spring autumn window table letter question answer reason
number system program problem example value result method report market money paper
music story friend mother father child children teacher doctor student village mountain
forest island harbour station bridge train market ship horse engine machine model server
request token prompt cache memory window signal network answer travel journey weather
quickly slowly carefully quietly suddenly always often seldom perhaps certainly almost
bright dark heavy simple careful curious ancient modern gentle strong quiet narrow wide
said asked replied thought wrote read walked looked turned opened closed waited began
remember consider describe explain measure compare follow arrive believe continue""".split()

NAMES = ["Alice", "Bob", "Clara", "Daniel", "Élodie", "François", "Günther", "Hannah",
         "Ingrid", "José", "Karin", "Łukasz", "Marta", "Niamh", "Oskar", "Zoë"]
PLACES = ["London", "Paris", "Zürich", "Kraków", "São Paulo", "New York", "Reykjavík",
          "Lisbon", "Montréal", "Oslo"]
EXTRA = ["don't", "it's", "can't", "we'll", "they're", "I'm", "o'clock", "e-mail",
         "well-known", "twenty-one", "U.S.", "e.g.", "i.e.", "etc.", "naïve", "café",
         "coöperate", "façade", "résumé", "déjà", "vu", "über", "—", "–", "&", "%", "$5",
         "3.14", "1,000", "2024", "42", "No.", "Mr.", "Dr.", "St.", "#1", "x86_64",
         "C++", "a/b", "50%", "10:30", "<tag>", "{brace}", "[note]", "^caret", "~tilde"]
PUNCT = [".", ".", ".", "!", "?", ";", ":", "…"]


def word(r):
    x = r.random()
    if x < 0.06:
        return r.choice(NAMES)
    if x < 0.09:
        return r.choice(PLACES)
    if x < 0.16:
        return r.choice(EXTRA)
    return r.choice(WORDS)


def sentence(r):
    n = r.randint(4, 22)
    ws = [word(r) for _ in range(n)]
    ws[0] = ws[0][:1].upper() + ws[0][1:]
    for i in range(1, n - 1):
        if r.random() < 0.08:
            ws[i] += ","
    if r.random() < 0.1:
        i = r.randrange(n)
        ws[i] = "“" + ws[i] + "”"
    if r.random() < 0.08:
        i = r.randrange(n)
        ws[i] = "(" + ws[i] + ")"
    if r.random() < 0.05:
        i = r.randrange(n)
        ws[i] = "'" + ws[i] + "'"
    return " ".join(ws) + r.choice(PUNCT)


def paragraph(r):
    return " ".join(sentence(r) for _ in range(r.randint(2, 7)))


def main():
    r = random.Random(20261123)
    os.makedirs(os.path.join(ROOT, "txt"), exist_ok=True)
    convs = []
    for i in range(30):
        turns = []
        for k in range(r.randint(2, 4)):
            turns.append({"from": "human" if k % 2 == 0 else "gpt",
                          "value": "\n\n".join(paragraph(r) for _ in range(r.randint(1, 3)))})
        convs.append({"id": f"conv{i}", "conversations": turns})
    with open(os.path.join(ROOT, "sharegpt.json"), "w", encoding="utf-8") as f:
        json.dump(convs, f, ensure_ascii=False)
    with open(os.path.join(ROOT, "rows.jsonl"), "w", encoding="utf-8") as f:
        for i in range(120):
            row = {"id": i, "text": paragraph(r)}
            if i % 10 == 3:
                row = {"id": i, "other": "no text field here"}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    for name in ["a", "b"]:
        with open(os.path.join(ROOT, "txt", f"{name}.txt"), "w", encoding="utf-8") as f:
            for _ in range(60):
                f.write(paragraph(r) + "\n\n")


if __name__ == "__main__":
    main()
