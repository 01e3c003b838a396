#!/usr/bin/env python3
"""Writes tests/data/tokenizer/corpus.jsonl: a deterministic tokenizer test
corpus, one JSON string per line (JSON so that newlines, tabs, NULs and any
Unicode survive), and tests/data/tokenizer/train.txt-like training text is
made by gen-tokenizer-goldens.py from train_lines() below.

Run:  python3 tools/gen-tokenizer-corpus.py  (from the repo root; stdlib only)

The corpus mixes English prose, code in several languages, CJK, emoji (ZWJ
sequences, skin tones, flags, keycaps), Arabic/Hebrew/Cyrillic/Devanagari/Thai/
Greek, combining marks, runs of spaces/tabs/newlines/CR, numbers of many
lengths and scripts, contractions with ' and U+2019 in mixed case, URLs, and
special tokens inside text. Everything comes from the fixed word lists here
and random.Random with fixed seeds, so reruns give identical bytes.
"""
import json
import os
import random

WORDS = """the of and to in is was that for on with as by at from his her they this have
had are not but be or an which one you were all we when there can who been has more if
will would what about so out up into them some time could than other then only its new
these two may first any like now my over such our man me even most made after also did
many before must through back years where much your way well down should because each
just those people how too little state good very make world still own see men work long
get here between both life being under never day same another know while last might us
great old year off come since against go came right used take three Tokenizer encoding
merge vocabulary byte level sentence piece model server kernel attention batch scheduler
prefix cache block paged memory stream socket request response latency throughput GPU
Hello World Python Rust Zürich naïve café résumé façade coöperate jalapeño Straße""".split()

CJK = [
    "我们今天去公园散步，天气非常好。", "机器学习模型需要大量的数据进行训练。", "你好，世界！",
    "北京是中国的首都，有着悠久的历史。", "这个问题的答案是四十二。", "深度学习改变了自然语言处理。",
    "今日はとても良い天気ですね。", "東京タワーに行きたいです。", "カタカナとひらがなと漢字。",
    "ありがとうございます！", "私はプログラマーです。", "ｶﾀｶﾅ半角もあります。",
    "안녕하세요, 반갑습니다.", "한국어 형태소 분석은 어렵습니다.", "서울은 대한민국의 수도입니다.",
    "𠀀𠀁𪚥 (CJK Extension B)", "繁體中文與簡體中文", "㈱㍿〒〶",
]
SCRIPTS = [
    "مرحبا بالعالم، كيف حالك؟", "اللغة العربية جميلة جدا ١٢٣٤٥", "שלום עולם, מה שלומך?",
    "עברית נכתבת מימין לשמאל", "Привет, мир! Как дела?", "Съешь же ещё этих мягких французских булок",
    "नमस्ते दुनिया, आप कैसे हैं?", "हिन्दी भाषा देवनागरी लिपि में लिखी जाती है। १२३",
    "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่าง", "Γειά σου Κόσμε! Ελληνικά ΑΒΓ αβγ",
    "Tiếng Việt có dấu: Xin chào thế giới", "Ελπίζω ότι τα πάντα πάνε καλά.",
    "Ærøskøbing ÆØÅ æøå", "İstanbul ıi İI ǅ ǈ ǋ", "ﬁnance ﬂow ﬀ ﬃ", "ΣΊΣΥΦΟΣ ς σ",
]
EMOJI = [
    "👍", "👍🏽", "👍🏿", "👨‍👩‍👧‍👦", "👩🏽‍💻", "🏳️‍🌈", "🏴‍☠️", "🇯🇵", "🇺🇸🇫🇷", "1️⃣", "#️⃣",
    "❤️", "♥", "😀😃😄", "🤗", "🦀", "🐍", "🧑‍🤝‍🧑", "👁️‍🗨️", "☺️", "✅", "🚀🚀🚀", "🫠",
]
COMBINING = [
    "e\u0301", "a\u0300\u0316", "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319",
    "n\u0303o", "\u0915\u093f", "\u05e9\u05c1\u05b8", "o\u0308\u0304", "\u1e9b\u0323", "A\u030a",
    "\u0041\u0338", "i\u0307", "\u3099\u309a", "\u20dd\u20e3",
]
SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", " \n", "\n ", " \t ",
          "\u00a0", "\u3000", "\u2009", "\u200b", "\u2028", " \u00a0 ", "\x0b", "\x0c", "\r"]
SPECIAL = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "</s>", "<s>", "<unk>",
           "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>",
           "<mask>", "<|fim_prefix|>", "<｜begin▁of▁sentence｜>", "<|im_start", "im_end|>",
           "<<s>>", "< s >", "<s", "s>", "<|", "|>", "<repo_name>", "<think>", "</think>"]
CONTRACTIONS = ["don't", "I'm", "we're", "they've", "she'll", "he'd", "it's", "DON'T", "I'M",
                "WE'RE", "They'Ve", "it'S", "It'LL", "y'all", "'s", "'S", "'t", "'re", "'ve",
                "'m", "'ll", "'d", "it’s", "don’t", "we’re", "'ſ", "'x", "''", "'", "o'clock",
                "rock'n'roll", "'tis", "'Twas", "l'été", "I'Ll", "'RE", "'rE"]
URLS = ["https://example.com/path?q=1&r=two#frag", "http://localhost:8080/v1/chat/completions",
        "ftp://files.example.org/pub/file-1.2.3.tar.gz", "mailto:someone@example.com",
        "www.wikipedia.org/wiki/Byte_pair_encoding", "/usr/local/bin/python3",
        "C:\\Users\\name\\Documents\\file.txt", "git@github.com:owner/repo.git",
        "user.name+tag@sub.domain.co.uk", "https://例え.jp/パス"]

CODE = [
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n",
    "#include <vector>\nint main() {\n  std::vector<int> v{1, 2, 3};\n  return v.size();\n}",
    "fn main() {\n    let xs: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", xs);\n}",
    "const f = async (x) => {\n  await fetch(`/api/${x}`);\n  return x ?? null;\n};",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC LIMIT 10;",
    "<div class=\"box\">\n  <p>Hello &amp; welcome</p>\n</div>",
    "{\"model\": \"smollm2\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}",
    "if [ -f \"$HOME/.bashrc\" ]; then\n    . \"$HOME/.bashrc\"\nfi",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}",
    "x = [i**2 for i in range(10) if i % 2 == 0]  # squares\n",
    "    \n\t\n        return None\n\n\n",
    "matrix[i][j] += alpha * (A[i, k] @ B[k, j]) - 0.5e-3;",
    "while(true){i++;if(i>=100)break;}//done",
    "class Foo(Base):\n    \"\"\"Docstring.\"\"\"\n    def __init__(self):\n        super().__init__()\n",
]


def number(rng):
    kind = rng.randrange(12)
    digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 24)))
    if kind == 0:
        return digits
    if kind == 1:
        return f"{rng.randint(-10**6, 10**6):,}"
    if kind == 2:
        return f"{rng.random() * 10 ** rng.randint(0, 8):.{rng.randint(0, 6)}f}"
    if kind == 3:
        return f"v{rng.randint(0, 9)}.{rng.randint(0, 99)}.{rng.randint(0, 999)}"
    if kind == 4:
        return f"+1 ({rng.randint(100, 999)}) {rng.randint(100, 999)}-{rng.randint(1000, 9999)}"
    if kind == 5:
        return rng.choice(["１２３４５", "٣٤٥٦", "४२", "²³", "½ ¾", "Ⅻ ⅷ", "①②", "๓๔", "1st 2nd 3rd"])
    if kind == 6:
        return f"{rng.randint(1, 12)}/{rng.randint(1, 28)}/{rng.randint(1900, 2100)}"
    if kind == 7:
        return f"{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}"
    if kind == 8:
        return f"0x{rng.getrandbits(rng.randint(4, 64)):X}"
    if kind == 9:
        return f"{rng.randint(1, 999)}{rng.choice(['km', 'ms', '%', 'GB', 'x', 'px'])}"
    if kind == 10:
        return digits + rng.choice(["abc", " ", "  ", ".", ",", "\n"]) + digits[::-1]
    return f"{rng.randint(1, 99)}e{rng.randint(-20, 20)}"


def sentence(rng, n_min=3, n_max=18):
    words = [rng.choice(WORDS) for _ in range(rng.randint(n_min, n_max))]
    if rng.random() < 0.5:
        words[0] = words[0].capitalize()
    if rng.random() < 0.2:
        words = [w.upper() if rng.random() < 0.3 else w for w in words]
    out = ""
    for i, w in enumerate(words):
        sep = " " if i else ""
        if i and rng.random() < 0.08:
            sep = rng.choice([", ", "; ", " - ", " — ", "  ", " (", "... "])
        out += sep + w
    return out + rng.choice([".", "!", "?", "", ":", "...", "!!", " ?"])


def random_unicode(rng, n):
    blocks = [(0x20, 0x7E), (0xA0, 0x17F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF),
              (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x2190, 0x22FF),
              (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFF00, 0xFFEF),
              (0x1F300, 0x1F64F), (0x1F900, 0x1F9FF), (0x10000, 0x1007F), (0x1D400, 0x1D7FF),
              (0x0, 0x1F), (0x7F, 0x9F), (0xE000, 0xE0FF), (0x20000, 0x2A6DF), (0x1C80, 0x1C8F)]
    out = []
    for _ in range(n):
        lo, hi = rng.choice(blocks)
        out.append(chr(rng.randint(lo, hi)))
    return "".join(out)


def mixed(rng):
    parts = []
    for _ in range(rng.randint(2, 7)):
        k = rng.randrange(11)
        if k == 0:
            parts.append(sentence(rng, 1, 6))
        elif k == 1:
            parts.append(rng.choice(CJK))
        elif k == 2:
            parts.append(rng.choice(SCRIPTS))
        elif k == 3:
            parts.append("".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 4))))
        elif k == 4:
            parts.append(rng.choice(COMBINING))
        elif k == 5:
            parts.append(number(rng))
        elif k == 6:
            parts.append(rng.choice(CONTRACTIONS))
        elif k == 7:
            parts.append(rng.choice(URLS))
        elif k == 8:
            parts.append(rng.choice(SPECIAL))
        elif k == 9:
            parts.append(rng.choice(SPACES))
        else:
            parts.append(random_unicode(rng, rng.randint(1, 6)))
    seps = ["", " ", " ", "  ", "\n", "\t", ""]
    return "".join(p + rng.choice(seps) for p in parts)


def chat(rng):
    roles = ["system", "user", "assistant"]
    out = ""
    for _ in range(rng.randint(1, 4)):
        out += f"<|im_start|>{rng.choice(roles)}\n{sentence(rng)}<|im_end|>\n"
    return out + rng.choice(["<|im_start|>assistant\n", "<|endoftext|>", ""])


def whitespace_line(rng):
    out = ""
    for _ in range(rng.randint(1, 8)):
        out += rng.choice(SPACES) * rng.randint(1, 3)
        if rng.random() < 0.6:
            out += rng.choice(WORDS + ["1", "22", "333", "!", "'s", "(", "🤗", "中"])
    return out


def fixed_lines():
    lines = ["", " ", "  ", "\n", "\t", "\r\n", "a", "A", "1", "'", "’", "<s>", "</s>",
             "<|endoftext|>", "<s></s>", " <s> ", "<s><s>x</s></s>", "Hello world",
             " Hello world", "Hello  world", "Hello world ", "hello\nworld", "\n\nfoo",
             "foo\n\n", "  leading", "trailing  ", "12345678901234567890", "3.14159",
             "x" * 1000, "ab" * 700, "9" * 500, "\U0001F600" * 200, "中文" * 300,
             " " * 300 + "end", "\n" * 100, "\t \n" * 60, "a b c d e f g h i j k l m n o p",
             "\x00\x01\x02 control \x7f\x1c\x1d\x1e\x1f", "\ufeffBOM", "zero\u200bwidth",
             "e\u0301\u0301\u0301", "\U000E0041 tag chars \U000E007F", "\U0010FFFF\uFFFD",
             "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
             "<unk><unk>", "<0x41><0xE4>", "▁▁hello ▁world", "Ġhello Ċ", "ſ 'ſ 'Ŝ",
             "The quick brown fox jumps over the lazy dog. " * 20,
             # added-token flags of the trained tokenizers: normalized, lstrip/rstrip, single_word
             "hello world", "say hello world!hello worlds", " \t<mask>\t x", "x<mask>y", "x <mask> y",
             "a </s> b", "a</s>b", "(</s>)", "é</s>", "<think>\nhmm\n</think>\n\nok", "  <mask>  "]
    return lines


def corpus_lines():
    rng = random.Random(20240611)
    lines = fixed_lines()
    gens = [sentence, mixed, mixed, chat, whitespace_line,
            lambda r: r.choice(CODE), lambda r: " ".join(number(r) for _ in range(r.randint(1, 6))),
            lambda r: r.choice(CJK) + r.choice(["", " ", "\n"]) + r.choice(CJK),
            lambda r: r.choice(SCRIPTS) + " " + r.choice(EMOJI) + " " + r.choice(SCRIPTS),
            lambda r: " ".join(r.choice(CONTRACTIONS) for _ in range(r.randint(1, 6))),
            lambda r: random_unicode(r, r.randint(1, 40)),
            lambda r: r.choice(SPECIAL) + sentence(r, 1, 5) + r.choice(SPECIAL) + r.choice(SPACES)]
    while len(lines) < 2200:
        lines.append(rng.choice(gens)(rng))
    return lines


def train_lines():
    """Training text for the small tokenizers gen-tokenizer-goldens.py trains."""
    rng = random.Random(777)
    gens = [sentence, sentence, sentence, mixed, lambda r: r.choice(CODE), whitespace_line,
            lambda r: r.choice(CJK), lambda r: r.choice(SCRIPTS),
            lambda r: " ".join(number(r) for _ in range(3))]
    return [rng.choice(gens)(rng) for _ in range(6000)]


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(root, "tests", "data", "tokenizer", "corpus.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for line in corpus_lines():
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
