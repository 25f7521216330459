//! Hostile input, round four (issue 48), class 4: traces given to `diff` (npz archives,
//! safetensors, JSON). The zip files are written by hand here, so that every field a
//! stranger controls (names, sizes, offsets, the compression method) can lie.

use super::hostile_inputs::{file, floats, header, npy, refuses, safetensors};
use std::path::{Path, PathBuf};

/// One zip member: its raw name, its stored bytes, the method and size its headers claim.
struct Member {
    name: Vec<u8>,
    data: Vec<u8>,
    method: u16,
    claimed: Option<u32>,
}

fn member(name: &[u8], data: Vec<u8>) -> Member {
    Member { name: name.to_vec(), data, method: 0, claimed: None }
}

/// CRC-32 (IEEE), bit by bit: slow, and enough for test files.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// A zip archive of `members`, plus `aliases` more directory entries that all point at the
/// first member's data under other names (the overlapping-member bomb).
fn zip(members: &[Member], aliases: usize) -> Vec<u8> {
    let (mut out, mut central, mut count) = (Vec::new(), Vec::new(), 0u16);
    let le16 = |v: &mut Vec<u8>, x: u16| v.extend_from_slice(&x.to_le_bytes());
    let le32 = |v: &mut Vec<u8>, x: u32| v.extend_from_slice(&x.to_le_bytes());
    // (crc, size, method) and where: a directory entry, of a member or an alias of the first.
    let mut entry = |central: &mut Vec<u8>, (crc, size, method): (u32, u32, u16), name: &[u8], offset: u32| {
        le32(central, 0x0201_4b50);
        [20, 20, 0, method, 0, 0x21].iter().for_each(|&x| le16(central, x));
        [crc, size, size].iter().for_each(|&x| le32(central, x));
        [name.len() as u16, 0, 0, 0, 0].iter().for_each(|&x| le16(central, x));
        [0, offset].iter().for_each(|&x| le32(central, x));
        central.extend_from_slice(name);
        count += 1;
    };
    let mut first = None;
    for m in members {
        let offset = out.len() as u32;
        let size = m.claimed.unwrap_or(m.data.len() as u32);
        let facts = (crc32(&m.data), size, m.method);
        first.get_or_insert(facts);
        le32(&mut out, 0x0403_4b50);
        [20, 0, m.method, 0, 0x21].iter().for_each(|&x| le16(&mut out, x));
        [facts.0, size, size].iter().for_each(|&x| le32(&mut out, x));
        [m.name.len() as u16, 0].iter().for_each(|&x| le16(&mut out, x));
        out.extend_from_slice(&m.name);
        out.extend_from_slice(&m.data);
        entry(&mut central, facts, &m.name, offset);
    }
    for i in 1..=aliases {
        entry(&mut central, first.unwrap(), format!("layers.{i}.attn.weights.npy").as_bytes(), 0);
    }
    let at = out.len() as u32;
    out.extend_from_slice(&central);
    le32(&mut out, 0x0605_4b50);
    [0, 0, count, count].iter().for_each(|&x| le16(&mut out, x));
    [central.len() as u32, at].iter().for_each(|&x| le32(&mut out, x));
    le16(&mut out, 0);
    out
}

/// `diff FILE GOOD`, refused naming `fragment`.
fn diff_refused(bad: &Path, good: &Path, fragment: &str) {
    refuses(&["diff", bad.to_str().unwrap(), good.to_str().unwrap()], fragment);
}

/// A valid trace to diff against.
fn good(dir: &Path) -> PathBuf {
    let p = dir.join("good.npz");
    let out = crate::common::cmd().args(["my shoes", "--save-trace", p.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success());
    p
}

#[test]
fn npz_archives_that_lie_are_refused_before_their_members_are_read() {
    let d = tempfile::tempdir().unwrap();
    let good = good(d.path());
    let weights = || npy(&header("<f4", "(1, 2, 2)"), &floats(4, 0.25));
    let name = b"layers.0.attn.weights.npy";
    // 2,000 directory entries over one 1 MiB member: 2 GB to read from a 1.2 MB file.
    let mib = npy(&header("<f4", "(1, 512, 512)"), &floats(512 * 512, 0.0));
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("overlap.npz", zip(&[member(name, mib)], 2000), "overlap (a zip bomb's trick)"),
        ("deflate.npz", zip(&[Member { method: 8, ..member(name, weights()) }], 0), "is compressed or encrypted"),
        (
            "claims.npz",
            zip(&[Member { claimed: Some(1 << 31), ..member(name, weights()) }], 0),
            "bytes that the file does not hold",
        ),
        ("up.npz", zip(&[member(b"../layers.0.attn.weights.npy", weights())], 0), "is not a plain name"),
        ("abs.npz", zip(&[member(b"/tmp/layers.0.attn.weights.npy", weights())], 0), "is not a plain name"),
        ("back.npz", zip(&[member(b"a\\..\\layers.0.attn.weights.npy", weights())], 0), "is not a plain name"),
        ("latin.npz", zip(&[member(b"layers.0.attn.\xff.npy", weights())], 0), "is not UTF-8"),
        ("twice.npz", zip(&[member(name, weights()), member(name, weights())], 0), "two members have the same name"),
        ("huge.npz", zip(&[member(name, npy(&header("<f4", "(1000000000000,)"), &[0; 16]))], 0), "claims shape"),
        ("junk.npz", zip(&[member(name, b"junk".to_vec())], 0), "no \\x93NUMPY magic"),
    ];
    for (file_name, bytes, fragment) in cases {
        diff_refused(&file(d.path(), file_name, &bytes), &good, fragment);
    }
    // A directory claiming 65,535 members in 22 bytes, and an archive cut in half.
    let mut eocd = b"PK\x05\x06\0\0\0\0\xff\xff\xff\xff".to_vec();
    eocd.extend_from_slice(&[0; 10]);
    diff_refused(&file(d.path(), "many.npz", &eocd), &good, "not a readable npz");
    let whole = std::fs::read(&good).unwrap();
    diff_refused(&file(d.path(), "cut.npz", &whole[..whole.len() / 2]), &good, "not a readable npz");
    // The hand-written archive itself is fine: a stored member diffs.
    let ok = file(d.path(), "ok.npz", &zip(&[member(name, weights())], 0));
    let out = super::hostile_inputs::bounded(&["diff", ok.to_str().unwrap(), ok.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn safetensors_and_json_traces_that_lie_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let good = good(d.path());
    let t = |dtype: &str, shape: &str, end: usize| {
        format!("\"embed.sum\":{{\"dtype\":\"{dtype}\",\"shape\":{shape},\"data_offsets\":[0,{end}]}}")
    };
    let f32s = floats(4, 0.5);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "twice.safetensors",
            safetensors(&format!("{{{},{}}}", t("F32", "[2,2]", 16), t("F32", "[2,2]", 16)), &f32s),
            "appears twice",
        ),
        (
            "beyond.safetensors",
            safetensors(&format!("{{{}}}", t("F32", "[2,2]", 1600)), &f32s),
            "not a readable safetensors",
        ),
        (
            "huge.safetensors",
            safetensors(&format!("{{{}}}", t("F32", "[1000000,1000000]", 16)), &f32s),
            "not a readable safetensors",
        ),
        (
            "cut.safetensors",
            safetensors(&format!("{{{}}}", t("F32", "[2,2]", 16)), &f32s)[..30].to_vec(),
            "not a readable safetensors",
        ),
        ("empty.json", b"  \n".to_vec(), "the file is empty"),
        ("twice.json", br#"{"embed.sum": [[1.0]], "embed.sum": [[2.0]]}"#.to_vec(), "appears twice"),
        ("ragged.json", br#"{"embed.sum": [[1.0], [1.0, 2.0]]}"#.to_vec(), "ragged"),
        (
            "deep.json",
            format!("{{\"embed.sum\": {}1{}}}", "[".repeat(100_000), "]".repeat(100_000)).into_bytes(),
            "recursion limit",
        ),
    ];
    for (name, bytes, fragment) in cases {
        diff_refused(&file(d.path(), name, &bytes), &good, fragment);
    }
    let mut lie = (1u64 << 63).to_le_bytes().to_vec();
    lie.extend_from_slice(b"{}");
    diff_refused(&file(d.path(), "lie.safetensors", &lie), &good, "not a readable safetensors");
}
