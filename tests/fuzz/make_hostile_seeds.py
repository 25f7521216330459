"""Writes the hostile fuzz seeds of the pickle and gguf targets (tests/fuzz/seeds/pickle,
tests/fuzz/seeds/gguf): small versions of the cases of tests/it/hostile_files.rs (issue 27).

    python3 tests/fuzz/make_hostile_seeds.py .   # from the repository root
"""
import struct, zipfile, io, sys, os
root = sys.argv[1]

def pkl(shape=b"K\x02K\x02\x86", storage=b"FloatStorage", key=b"w", offset=b"K\x00", strlen=None):
    name = b"w"
    ln = struct.pack("<I", len(name)) if strlen is None else struct.pack("<I", strlen)
    return (b"\x80\x02}q\x00(X" + ln + name + b"q\x01ctorch._utils\n_rebuild_tensor_v2\nq\x02((X\x07\x00\x00\x00storageq\x03ctorch\n"
            + storage + b"\nq\x04X\x01\x00\x00\x000q\x05X\x03\x00\x00\x00cpuq\x06K\x04tq\x07Q" + offset + shape
            + b"q\x08K\x02K\x01\x86q\x09\x89ccollections\nOrderedDict\nq\x0a)Rq\x0btq\x0cRq\x0du.")

def archive(data_pkl, storage=b"\x00\x00\x80?" * 4):
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", data_pkl)
        z.writestr("archive/byteorder", b"little")
        z.writestr("archive/data/0", storage)
        z.writestr("archive/version", b"3\n")
    return b.getvalue()

bomb = b"\x80\x02]q\x00" + b"(h\x00h\x00tq\x00" * 40 + b"."
deep = b"\x80\x02" + b"]" * 1000 + b"a" * 999 + b"."
pickles = {
    "ok.bin": archive(pkl()),
    "string_4gib.bin": archive(pkl(strlen=0xffffffff)),
    "shape_2p40.bin": archive(pkl(shape=b"J\x00\x00\x10\x00J\x00\x00\x10\x00\x86")),
    "offset_past_storage.bin": archive(pkl(offset=b"J\x00\x00\x00\x01")),
    "memo_bomb.bin": archive(bomb),
    "deep_lists.bin": archive(deep),
    "int_storage.bin": archive(pkl(storage=b"IntStorage")),
    "qint8_storage.bin": archive(pkl(storage=b"QInt8Storage")),
}
d = os.path.join(root, "tests/fuzz/seeds/pickle"); os.makedirs(d, exist_ok=True)
for n, b in pickles.items():
    open(os.path.join(d, n), "wb").write(b)

def s(t): t = t.encode(); return struct.pack("<Q", len(t)) + t
def gguf(kvs, tensors, align=32):
    b = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for k, (ty, v) in kvs:
        b += s(k) + struct.pack("<I", ty)
        b += s(v) if ty == 8 else struct.pack({4: "<I", 10: "<Q", 6: "<f"}[ty], v)
    nxt = 0
    for name, dims, off in tensors:
        b += s(name) + struct.pack("<I", 2) + struct.pack("<QQ", *dims) + struct.pack("<I", 0) + struct.pack("<Q", nxt if off is None else off)
        nxt += (dims[0] * dims[1] * 4 + 31) // 32 * 32
    a = max(align, 1)
    return b + b"\x00" * ((len(b) + a - 1) // a * a - len(b) + nxt + 64)

def kvs(**edit):
    base = {"general.architecture": (8, "llama"), "llama.block_count": (4, 2), "llama.context_length": (4, 32),
            "llama.embedding_length": (4, 8), "llama.feed_forward_length": (4, 16), "llama.attention.head_count": (4, 2),
            "llama.rope.freq_base": (6, 10000.0), "llama.attention.layer_norm_rms_epsilon": (6, 1e-5)}
    for k, v in edit.items():
        base[k.replace("__", ".")] = v
    return list(base.items())
T = [("token_embd.weight", (8, 10), None), ("blk.0.attn_q.weight", (8, 8), None), ("blk.1.attn_q.weight", (8, 8), None)]
ggufs = {
    "base.gguf": gguf(kvs(), T),
    "block_count_2p40.gguf": gguf(kvs(llama__block_count=(10, 1 << 40)), T),
    "alignment_0.gguf": gguf(kvs(general__alignment=(4, 0)), T),
    "alignment_48.gguf": gguf(kvs(general__alignment=(4, 48)), T, 48),
    "alignment_u64.gguf": gguf(kvs(general__alignment=(10, 32)), T),
    "offset_plus_4.gguf": gguf(kvs(), [T[0], ("blk.0.attn_q.weight", (8, 8), 324), T[2]]),
    "duplicate_tensor.gguf": gguf(kvs(), [T[0], T[1], T[1], T[2]]),
    "duplicate_key.gguf": gguf(kvs() + [("llama.block_count", (4, 1))], T),
    "freq_base_string.gguf": gguf(kvs(llama__rope__freq_base=(8, "1e6")), T),
    "freq_base_0.gguf": gguf(kvs(llama__rope__freq_base=(6, 0.0)), T),
    "eps_nan.gguf": gguf(kvs(llama__attention__layer_norm_rms_epsilon=(6, float("nan"))), T),
    "rope_dims_2.gguf": gguf(kvs(llama__rope__dimension_count=(4, 2)), T),
    "head_count_string.gguf": gguf(kvs(llama__attention__head_count=(8, "2")), T),
    "heads_9_wide.gguf": gguf(kvs(llama__embedding_length=(4, 18)), T),
}
d = os.path.join(root, "tests/fuzz/seeds/gguf")
for n, b in ggufs.items():
    open(os.path.join(d, n), "wb").write(b)
