//! What the import drawing says in numbers: the report the architecture test prints (with
//! `--nocapture`), and `walk`, the rooms and moves of a walk from one function.

use crate::architecture::{back_up, cycles, stage, top, ALLOWLIST};
use crate::architecture_imports::{Drawing, Token};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The closing note's figures: lines per top module, the files within 20 lines of the 400-line
/// cap, the number of module edges, the cycles and the arrows back up (per folder).
pub fn report(d: &Drawing, found: &BTreeMap<(String, String), BTreeSet<String>>) {
    let mut per: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (f, n) in &d.lines {
        let e = per.entry(top(d, f)).or_default();
        *e = (e.0 + n, e.1 + 1);
    }
    println!("lines per top module (its file and folder):");
    for (m, (n, files)) in &per {
        println!("  {m:<12} {n:>6} lines in {files} files");
    }
    let near: Vec<String> = d.lines.iter().filter(|(_, n)| **n > 380).map(|(f, n)| format!("{f} ({n})")).collect();
    println!("files within 20 lines of the 400-line cap: {}: {}", near.len(), near.join(", "));
    let edges: usize = d.edges.values().map(|e| e.len()).sum();
    println!("module edges (file → module file): {edges}");
    let cycles = cycles(d);
    println!("cycles: {}", cycles.len());
    for c in &cycles {
        println!("  {}", c.join(" ↔ "));
    }
    let mut up: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (f, tos) in &d.edges {
        for t in tos.iter().filter(|t| back_up(d, f, t)) {
            let folder = f.rsplit_once('/').map_or(f.as_str(), |(dir, _)| dir).to_string();
            up.entry(folder).or_default().push(format!("{f} → {t}"));
        }
    }
    println!("arrows back up: {}", up.values().map(Vec::len).sum::<usize>());
    for (folder, arrows) in &up {
        println!("  {folder}/: {}", arrows.len());
        for a in arrows {
            println!("    {a}");
        }
    }
    let stages = found
        .iter()
        .filter(|(_, w)| w.iter().any(|w| w.contains("stage") || w.contains("cli") || w.contains("vocabulary")));
    println!("against the stage order: {}", stages.clone().count());
    for ((f, t), w) in stages {
        println!("  {f} → {t}: {}", w.iter().cloned().collect::<Vec<_>>().join("; "));
    }
    println!("violations: {} pairs ({} allowlisted)", found.len(), ALLOWLIST.len());
}

/// The token range of the body of the first `fn NAME` of a file.
fn body(t: &[Token], name: &str) -> Option<(usize, usize)> {
    let named = |i: usize, s: &str| matches!(t.get(i), Some(Token::Ident(x)) if x == s);
    let start = (0..t.len()).find(|&i| named(i, "fn") && named(i + 1, name))?;
    let open = (start..t.len()).find(|&i| matches!(t[i], Token::Open | Token::Other(';')))?;
    let mut depth = 0;
    let end = (open..t.len()).find(|&i| {
        depth += match t[i] {
            Token::Open => 1,
            Token::Close => -1,
            _ => 0,
        };
        depth == 0
    })?;
    Some((start, end))
}

/// The moves of a walk from one function, as (from file, to file, to item).
fn calls(d: &Drawing, file: &str, func: &str) -> Vec<(String, String, Option<String>)> {
    let mut out = Vec::new();
    let Some((s, e)) = body(&d.code[file], func) else { return out };
    for (_, to, item) in d.at.get(file).into_iter().flatten().filter(|(i, _, _)| (s..=e).contains(i)) {
        out.push((file.to_string(), to.clone(), item.clone()));
    }
    // Bare calls `name(…)`: a function of the same file (no move), or a name bound by `use`.
    let t = &d.code[file];
    for i in s + 2..e {
        let (Token::Ident(x), Some(Token::Other('('))) = (&t[i], t.get(i + 1)) else { continue };
        if matches!(&t[i - 1], Token::Sep | Token::Other('.')) || matches!(&t[i - 1], Token::Ident(f) if f == "fn") {
            continue;
        }
        match d.bound[file].get(x) {
            Some((to, item)) if to != file => out.push((file.to_string(), to.clone(), item.clone())),
            _ => out.push((file.to_string(), file.to_string(), Some(x.clone()))),
        }
    }
    out
}

/// `walk`: from one function (`WALK=src/lib.rs::computed`, the default), the rooms (folders)
/// visited, the moves (a step from one file to another) and how many of them go back up.
/// An approximation from the import drawing, in two readings:
/// - the call walk: from the function's body, every path it names (`settings::plan::Plan::new`,
///   `crate::model::forward`) and every bare call of a name bound by `use` is a move to that
///   file, and the walk goes on into the named function's body there (the first `fn` of that
///   name in the file; a bare call of a function of the same file is followed without a move).
///   Method calls (`x.run()`) are not seen. Each distinct file → file move is counted once.
/// - the import closure: every file those first moves reach, breadth first, moving along all of
///   its arrows (each arrow counted once).
///
/// A move goes back up when it is an arrow back up (to an ancestor's file: a parent's `mod.rs`,
/// or `lib.rs` from a lower stage) or climbs the stage order (to a later stage of `STAGES`).
/// `WALK=src/lib.rs::computed cargo test --test it architecture_walk -- --ignored --nocapture`.
#[test]
#[ignore]
fn architecture_walk() {
    let spec = std::env::var("WALK").unwrap_or_else(|_| "src/lib.rs::computed".to_string());
    let (file, func) = spec.rsplit_once("::").expect("WALK is FILE::FUNCTION");
    let d = Drawing::read();
    assert!(body(d.code.get(file).expect("no such file"), func).is_some(), "no function {func} in {file}");
    let up = |f: &str, to: &str| back_up(&d, f, to) || stage(&top(&d, to)) > stage(&top(&d, f));
    let room = |f: &str| f.rsplit_once('/').map_or(f.to_string(), |(dir, _)| dir.to_string());
    // The call walk.
    let mut todo = VecDeque::from([(file.to_string(), func.to_string())]);
    let (mut done, mut moves, mut seen) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::from([file.to_string()]));
    while let Some(at) = todo.pop_front() {
        if done.insert(at.clone()) {
            for (f, to, item) in calls(&d, &at.0, &at.1) {
                if f != to {
                    moves.insert((f, to.clone()));
                }
                seen.insert(to.clone());
                todo.extend(item.map(|i| (to, i)));
            }
        }
    }
    let rooms: BTreeSet<String> = seen.iter().map(|f| room(f)).collect();
    let back: Vec<String> = moves.iter().filter(|(f, t)| up(f, t)).map(|(f, t)| format!("{f} → {t}")).collect();
    println!(
        "call walk from {spec}: {} rooms, {} files, {} moves, {} back up",
        rooms.len(),
        seen.len(),
        moves.len(),
        back.len()
    );
    println!("  rooms: {}", rooms.iter().cloned().collect::<Vec<_>>().join(" "));
    println!("  moves back up:\n    {}", back.join("\n    "));
    // The import closure.
    let first: BTreeSet<String> =
        calls(&d, file, func).into_iter().map(|(_, to, _)| to).filter(|t| t != file).collect();
    let mut arrows: Vec<(String, String)> = first.iter().map(|t| (file.to_string(), t.clone())).collect();
    let mut reached: BTreeSet<String> = first.clone();
    let mut queue: VecDeque<String> = first.into_iter().collect();
    while let Some(f) = queue.pop_front() {
        for to in &d.edges[&f] {
            arrows.push((f.clone(), to.clone()));
            if reached.insert(to.clone()) {
                queue.push_back(to.clone());
            }
        }
    }
    reached.insert(file.to_string());
    let rooms: BTreeSet<String> = reached.iter().map(|f| room(f)).collect();
    let back = arrows.iter().filter(|(f, t)| up(f, t)).count();
    println!(
        "import closure: {} rooms, {} files, {} moves, {} back up",
        rooms.len(),
        reached.len(),
        arrows.len(),
        back
    );
}
