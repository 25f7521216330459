//! Hostile input, round three (issue 27): malformed model files. Each test is one class, fixed
//! at its root, with several cases; every refusal is one line (even with RUST_BACKTRACE=1),
//! exit 2, naming the key or tensor, under an address-space and a time limit.

use crate::common::root;
use crate::hostile::refused;
use std::path::{Path, PathBuf};
use std::process::Output;

/// attn-trace on `model` under a 1.5 GB address-space limit, 30 s and RUST_BACKTRACE=1.
pub(super) fn trace(model: &Path) -> Output {
    let bin = env!("CARGO_BIN_EXE_attn-trace");
    let script = format!("ulimit -v 1500000; exec timeout 30 {bin} 'my shoes' --model '{}'", model.display());
    std::process::Command::new("sh").args(["-c", &script]).env("RUST_BACKTRACE", "1").output().unwrap()
}

/// A usage error (exit 2) in one line naming `fragment`.
pub(super) fn refused_line(out: &Output, fragment: &str) {
    refused(out, fragment);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// A copy of the fixture model folder `name` in `dir`, with `edit` applied to its config.json.
pub(super) fn folder(dir: &Path, name: &str, edit: impl Fn(&mut serde_json::Value)) -> PathBuf {
    let (from, to) = (root().join("fixtures").join(name), dir.join(name.replace('/', "_")));
    std::fs::create_dir_all(&to).unwrap();
    for e in std::fs::read_dir(&from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
    let cfg = to.join("config.json");
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&cfg).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&cfg, v.to_string()).unwrap();
    to
}

/// The llama-bin fixture's pytorch_model.bin with data.pkl given by `edit`, and the rest as is.
fn with_pickle(dir: &Path, tag: &str, edit: impl Fn(Vec<u8>) -> Vec<u8>) -> PathBuf {
    with_entries(dir, tag, |name, b| if name.ends_with("data.pkl") { edit(b) } else { b })
}

/// The llama-bin fixture's pytorch_model.bin with each entry given by `edit(name, bytes)`.
fn with_entries(dir: &Path, tag: &str, edit: impl Fn(&str, Vec<u8>) -> Vec<u8>) -> PathBuf {
    use std::io::{Read, Write};
    let model = folder(&dir.join(tag), "decoders/llama-bin", |_| {});
    let bin = model.join("pytorch_model.bin");
    let mut zip = zip::ZipArchive::new(std::fs::File::open(&bin).unwrap()).unwrap();
    let mut out = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for i in 0..zip.len() {
        let mut f = zip.by_index(i).unwrap();
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes).unwrap();
        let name = f.name().unwrap().to_string();
        let bytes = edit(&name, bytes);
        out.start_file(name, opts).unwrap();
        out.write_all(&bytes).unwrap();
    }
    std::fs::write(&bin, out.finish().unwrap().into_inner()).unwrap();
    model
}

/// `bytes` with the first `from` replaced by `to`.
fn replace(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let at = bytes.windows(from.len()).position(|w| w == from).expect("the pattern is in the fixture");
    [&bytes[..at], to, &bytes[at + from.len()..]].concat()
}

#[test]
fn class2_claimed_sizes_are_checked_before_anything_is_allocated() {
    let dir = tempfile::tempdir().unwrap();
    // The fixture itself reads, through our reader.
    assert!(trace(&with_pickle(dir.path(), "ok", |b| b)).status.success());
    // The first key, "model.embed_tokens.weight", claims 4 GiB.
    let huge = with_pickle(dir.path(), "string", |b| {
        replace(&b, b"X\x19\x00\x00\x00model.embed", b"X\xff\xff\xff\xffmodel.embed")
    });
    refused_line(&trace(&huge), "a string of 4294967295 bytes at byte 11 runs past the end");
    // The token table claims 2^20 × 2^20 floats; its storage holds 53,248 bytes.
    let shape = with_pickle(dir.path(), "shape", |b| {
        replace(&b, b"M\xa0\x01K\x20\x86", b"J\x00\x00\x10\x00J\x00\x00\x10\x00\x86")
    });
    refused_line(&trace(&shape), "model.embed_tokens.weight claims shape [1048576, 1048576] (f32");
    // A memo re-referenced twice per level, 40 levels deep: 2^40 objects if copied.
    let bomb = with_pickle(dir.path(), "memo", |_| {
        let mut p = b"\x80\x02]q\x00".to_vec();
        (0..40).for_each(|_| p.extend(b"(h\x00h\x00tq\x00"));
        [p, b".".to_vec()].concat()
    });
    refused_line(&trace(&bomb), "data.pkl holds no dictionary of tensors");
    // Lists nested 100,000 deep.
    let deep = with_pickle(dir.path(), "deep", |_| {
        [b"\x80\x02".to_vec(), b"]".repeat(100_000), b"a".repeat(99_999), b".".to_vec()].concat()
    });
    refused_line(&trace(&deep), "objects nest deeper than 64 levels");
    // A storage that claims more than the file.
    let storage = with_pickle(dir.path(), "offset", |b| replace(&b, b"K\x00M\xa0\x01", b"J\x00\x00\x00\x01M\xa0\x01"));
    refused_line(&trace(&storage), "model.embed_tokens.weight claims shape [416, 32]");
}

/// A GGUF metadata value.
enum V {
    U32(u32),
    U64(u64),
    F32(f32),
    Str(&'static str),
}

/// A GGUF (version 3) of a tiny llama: hidden 8, 2 heads, 2 blocks, F32 tensors of zeros at
/// the offsets given (`None`: the next aligned one). No tokenizer: the checks come first.
fn gguf(kvs: &[(&str, V)], tensors: &[(&str, [u64; 2], Option<u64>)], align: u64) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend((tensors.len() as u64).to_le_bytes());
    b.extend((kvs.len() as u64).to_le_bytes());
    let s = |b: &mut Vec<u8>, t: &str| {
        b.extend((t.len() as u64).to_le_bytes());
        b.extend(t.as_bytes());
    };
    for (k, v) in kvs {
        s(&mut b, k);
        match v {
            V::U32(x) => b.extend([&4u32.to_le_bytes()[..], &x.to_le_bytes()].concat()),
            V::U64(x) => b.extend([&10u32.to_le_bytes()[..], &x.to_le_bytes()].concat()),
            V::F32(x) => b.extend([&6u32.to_le_bytes()[..], &x.to_le_bytes()].concat()),
            V::Str(t) => {
                b.extend(8u32.to_le_bytes());
                s(&mut b, t);
            }
        }
    }
    let mut next = 0;
    for (name, dims, offset) in tensors {
        s(&mut b, name);
        b.extend(2u32.to_le_bytes());
        dims.iter().for_each(|d| b.extend(d.to_le_bytes()));
        b.extend(0u32.to_le_bytes());
        b.extend(offset.unwrap_or(next).to_le_bytes());
        next += (dims[0] * dims[1] * 4).div_ceil(32) * 32;
    }
    b.resize(b.len().div_ceil(align.max(1) as usize) * align.max(1) as usize + next as usize + 64, 0);
    b
}

fn llama_kvs(edit: &[(&'static str, Option<V>)]) -> Vec<(&'static str, V)> {
    let mut kvs = vec![
        ("general.architecture", V::Str("llama")),
        ("llama.block_count", V::U32(2)),
        ("llama.context_length", V::U32(32)),
        ("llama.embedding_length", V::U32(8)),
        ("llama.feed_forward_length", V::U32(16)),
        ("llama.attention.head_count", V::U32(2)),
        ("llama.rope.freq_base", V::F32(10000.0)),
        ("llama.attention.layer_norm_rms_epsilon", V::F32(1e-5)),
    ];
    for (key, value) in edit {
        kvs.retain(|(k, _)| k != key);
        if let Some(v) = value {
            kvs.push((key, v.clone_v()));
        }
    }
    kvs
}

impl V {
    fn clone_v(&self) -> V {
        match self {
            V::U32(x) => V::U32(*x),
            V::U64(x) => V::U64(*x),
            V::F32(x) => V::F32(*x),
            V::Str(t) => V::Str(t),
        }
    }
}

const TENSORS: &[(&str, [u64; 2], Option<u64>)] = &[
    ("token_embd.weight", [8, 10], None),
    ("blk.0.attn_q.weight", [8, 8], None),
    ("blk.1.attn_q.weight", [8, 8], None),
];

/// Writes `bytes` as a .gguf in `dir` and traces it.
fn trace_gguf(dir: &Path, name: &str, bytes: &[u8]) -> Output {
    let p = dir.join(format!("{name}.gguf"));
    std::fs::write(&p, bytes).unwrap();
    trace(&p)
}

#[test]
fn class3_impossible_models_are_refused_before_any_loop() {
    let dir = tempfile::tempdir().unwrap();
    // The base file passes every structural check and stops at its missing tokenizer.
    let out = trace_gguf(dir.path(), "base", &gguf(&llama_kvs(&[]), TENSORS, 32));
    refused_line(&out, "tokenizer");
    let blocks = gguf(&llama_kvs(&[("llama.block_count", Some(V::U64(1 << 40)))]), TENSORS, 32);
    refused_line(
        &trace_gguf(dir.path(), "blocks", &blocks),
        "llama.block_count is 1099511627776 but the file holds blocks blk.0 to blk.1",
    );
    let zero = gguf(&llama_kvs(&[("general.alignment", Some(V::U32(0)))]), TENSORS, 32);
    refused_line(&trace_gguf(dir.path(), "align0", &zero), "general.alignment is 0; expected a power of two");
    // Folders: a config claiming 10^12 layers, for a decoder and for BERT.
    let layers = |v: &mut serde_json::Value| v["num_hidden_layers"] = serde_json::json!(1_000_000_000_000u64);
    let llama = folder(dir.path(), "decoders/llama-gqa", layers);
    refused_line(&trace(&llama), "num_hidden_layers is 1000000000000 but the checkpoint holds layers 0 to 1");
    let bert = folder(dir.path(), "tiny-bert", layers);
    refused_line(&trace(&bert), "num_hidden_layers is 1000000000000 but the checkpoint holds layers 0 to");
    // 10^12 heads of 10^12 wide models: sizes are checked against the stored shapes first
    // (a head map of 10^12 entries was allocated before the memory cap was consulted).
    let heads = folder(&dir.path().join("heads"), "decoders/llama-gqa", |v| {
        v["num_attention_heads"] = serde_json::json!(1_000_000_000_000u64);
        v["hidden_size"] = serde_json::json!(1_000_000_000_000u64);
    });
    refused_line(
        &trace(&heads),
        "model.embed_tokens.weight has shape [416, 32] but config.json implies [416, 1000000000000]",
    );
    let wide = llama_kvs(&[
        ("llama.embedding_length", Some(V::U64(1 << 40))),
        ("llama.attention.head_count", Some(V::U64(1 << 39))),
        ("llama.attention.head_count_kv", Some(V::U32(1))),
    ]);
    let wide = trace_gguf(dir.path(), "wide", &gguf(&wide, TENSORS, 32));
    refused_line(&wide, "token_embd.weight has shape [10, 8] but the metadata implies [10, 1099511627776]");
    let bin = with_pickle(dir.path(), "bin", |b| b);
    let cfg = bin.join("config.json");
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&cfg).unwrap()).unwrap();
    v["num_hidden_layers"] = serde_json::json!(3);
    std::fs::write(&cfg, v.to_string()).unwrap();
    refused_line(&trace(&bin), "num_hidden_layers is 3 but the checkpoint holds layers 0 to 1 (2 in all)");
}

#[test]
fn class4_malformed_files_are_named_not_read_as_something_else() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "align48",
            gguf(&llama_kvs(&[("general.alignment", Some(V::U32(48)))]), TENSORS, 48),
            "general.alignment is 48",
        ),
        (
            "align64",
            gguf(&llama_kvs(&[("general.alignment", Some(V::U64(32)))]), TENSORS, 32),
            "general.alignment holds a u64; expected a u32",
        ),
        (
            "offset",
            gguf(&llama_kvs(&[]), &[TENSORS[0], ("blk.0.attn_q.weight", [8, 8], Some(324)), TENSORS[2]], 32),
            "tensor \"blk.0.attn_q.weight\"'s offset 324 is not a multiple of the alignment 32",
        ),
        (
            "dup_tensor",
            gguf(&llama_kvs(&[]), &[TENSORS[0], TENSORS[1], TENSORS[1], TENSORS[2]], 32),
            "tensor \"blk.0.attn_q.weight\" appears twice",
        ),
        (
            "theta_text",
            gguf(&llama_kvs(&[("llama.rope.freq_base", Some(V::Str("1e6")))]), TENSORS, 32),
            "llama.rope.freq_base holds a string; expected an f32",
        ),
        (
            "theta0",
            gguf(&llama_kvs(&[("llama.rope.freq_base", Some(V::F32(0.0)))]), TENSORS, 32),
            "llama.rope.freq_base is 0; expected a finite number above 0",
        ),
        (
            "eps_nan",
            gguf(&llama_kvs(&[("llama.attention.layer_norm_rms_epsilon", Some(V::F32(f32::NAN)))]), TENSORS, 32),
            "layer_norm_rms_epsilon is NaN",
        ),
        (
            "rot",
            gguf(&llama_kvs(&[("llama.rope.dimension_count", Some(V::U32(2)))]), TENSORS, 32),
            "llama.rope.dimension_count is 2 but the heads are 4 wide",
        ),
        (
            "heads_text",
            gguf(&llama_kvs(&[("llama.attention.head_count", Some(V::Str("2")))]), TENSORS, 32),
            "llama.attention.head_count holds a string; expected an unsigned integer",
        ),
    ];
    for (name, bytes, fragment) in cases {
        refused_line(&trace_gguf(dir.path(), name, &bytes), fragment);
    }
    // A key given twice (the first says 2 blocks, the second 1).
    let mut kvs = llama_kvs(&[]);
    kvs.push(("llama.block_count", V::U32(1)));
    refused_line(
        &trace_gguf(dir.path(), "dup_key", &gguf(&kvs, TENSORS, 32)),
        "key \"llama.block_count\" appears twice",
    );
    // Folders.
    for (theta, shown) in [(0.0, "rope_theta is 0;"), (-1.0, "rope_theta is -1;")] {
        let m = folder(&dir.path().join(shown.len().to_string() + &theta.to_string()), "decoders/llama-gqa", |v| {
            v["rope_theta"] = serde_json::json!(theta)
        });
        refused_line(&trace(&m), shown);
    }
    // A config.json key given twice (BERT's config was read leniently: the last one won).
    let twice = folder(dir.path(), "tiny-bert", |_| {});
    let text = std::fs::read_to_string(twice.join("config.json")).unwrap().replacen('{', "{\"hidden_size\": 7, ", 1);
    std::fs::write(twice.join("config.json"), text).unwrap();
    refused_line(&trace(&twice), "the key \"hidden_size\" appears twice");
    let mistral = folder(dir.path(), "decoders/mistral", |v| v["sliding_window"] = serde_json::json!(0));
    refused_line(&trace(&mistral), "sliding_window is 0; expected a window of at least 1 token");
    // Integer weights are refused, not converted: an i32 token table (safetensors) and
    // every tensor of a pickle stored as torch.IntStorage.
    let ints = folder(dir.path(), "decoders/llama-tied", |_| {});
    let st = std::fs::read(ints.join("model.safetensors")).unwrap();
    let st = replace(
        &st,
        br#""model.embed_tokens.weight":{"dtype":"F32""#,
        br#""model.embed_tokens.weight":{"dtype":"I32""#,
    );
    std::fs::write(ints.join("model.safetensors"), st).unwrap();
    refused_line(&trace(&ints), "tensor model.embed_tokens.weight is stored as i32; expected floats");
    let pkl = with_pickle(dir.path(), "int", |b| replace(&b, b"ctorch\nFloatStorage\n", b"ctorch\nIntStorage\n"));
    refused_line(&trace(&pkl), "is stored as i32 (torch.IntStorage); expected floats");
    // Storages written by a big-endian machine (they were read as little-endian values).
    let big = with_entries(dir.path(), "big", |name, b| if name.ends_with("byteorder") { b"big".to_vec() } else { b });
    refused_line(&trace(&big), "pytorch_model.bin: byteorder is \"big\"; expected little");
}

#[test]
fn class7_messages_name_the_key_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    // An odd rotary head width: config head_dim 3, and a GGUF with 9-wide heads.
    let odd = folder(dir.path(), "decoders/llama-gqa", |v| v["head_dim"] = serde_json::json!(3));
    refused_line(&trace(&odd), "the heads are 3 wide, an odd width; rotary positions turn pairs");
    let nine = gguf(&llama_kvs(&[("llama.embedding_length", Some(V::U32(18)))]), TENSORS, 32);
    refused_line(&trace_gguf(dir.path(), "nine", &nine), "the heads are 9 wide");
    // A storage type torch has but the reader does not know.
    let q = with_pickle(dir.path(), "qint", |b| replace(&b, b"ctorch\nFloatStorage\n", b"ctorch\nQInt8Storage\n"));
    refused_line(&trace(&q), "is stored as torch.QInt8Storage; expected floats");
    // Keys holding the wrong kind of value.
    for (key, value, shown) in [
        ("vocab_size", serde_json::json!(-1), "config.json: vocab_size is -1; expected an integer ≥ 0"),
        ("rope_theta", serde_json::json!("big"), "config.json: rope_theta is the string \"big\"; expected a number"),
        ("tie_word_embeddings", serde_json::json!(1), "config.json: tie_word_embeddings is 1; expected true or false"),
    ] {
        let m = folder(&dir.path().join(key), "decoders/llama-gqa", |v| v[key] = value.clone());
        refused_line(&trace(&m), shown);
    }
    let bert = folder(dir.path(), "tiny-bert", |v| v["vocab_size"] = serde_json::json!(-1));
    refused_line(&trace(&bert), "config.json: vocab_size is -1; expected an integer ≥ 0");
}

/// A stable-toolchain stand-in for the fuzz targets (tests/fuzz: pickle, gguf): every seed,
/// mutated a few thousand times (bytes overwritten with edge values, cut short, spliced), goes
/// through the readers' `check_bytes` and must end in a result or an error, never a panic.
/// `ATTN_TRACE_MUTATIONS=N` runs N per seed (400 by default) and takes large seeds too.
#[test]
fn mutated_model_files_end_in_a_result_or_an_error() {
    let runs: usize = std::env::var("ATTN_TRACE_MUTATIONS").ok().and_then(|n| n.parse().ok()).unwrap_or(400);
    let seeds = |target: &str| -> Vec<Vec<u8>> {
        let dir = root().join("tests/fuzz/seeds").join(target);
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        let small = |b: &Vec<u8>| b.len() < 8192 || runs > 400;
        files.iter().map(|p| std::fs::read(p).unwrap()).filter(small).collect()
    };
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n.max(1) as u64) as usize
    };
    type Check = fn(&[u8]) -> anyhow::Result<()>;
    let checks: [(&str, Check); 2] = [
        ("pickle", attn_trace::sources::hf::pickle::check_bytes),
        ("gguf", attn_trace::sources::gguf::Gguf::check_bytes),
    ];
    for (target, check) in checks {
        let seeds = seeds(target);
        assert!(seeds.len() >= 8, "{target}: {} seeds", seeds.len());
        for seed in &seeds {
            for _ in 0..runs {
                let mut b = seed.clone();
                for _ in 0..1 + next(4) {
                    let at = next(b.len());
                    match next(4) {
                        0 => b[at] = [0x00, 0xff, 0x7f, 0x80, 0x01][next(5)],
                        1 => b[at..].iter_mut().take(8).for_each(|x| *x = 0xff),
                        2 => b.truncate(at.max(1)),
                        _ => b[at] ^= 1 << next(8),
                    }
                }
                let _ = check(&b);
            }
        }
    }
}
