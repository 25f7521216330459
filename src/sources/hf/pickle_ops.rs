//! The pickle opcodes `torch.save` writes (protocols 2 to 4), interpreted into shared, bounded
//! objects for `pickle.rs`. Nothing is executed: a GLOBAL is a name, a REDUCE a record of a
//! call. Every length is checked against the bytes left before anything is allocated; a
//! memoized object is shared, not copied, when it is referenced again; nesting deeper than
//! `MAX_DEPTH` and copying more than a few times the pickle's size are refused.

use std::collections::BTreeMap;
use std::rc::Rc;

/// The deepest nesting of objects accepted (torch.save's state dicts nest about 6 deep).
const MAX_DEPTH: usize = 64;

/// One object of the pickle.
#[derive(Debug, Clone)]
pub enum Node {
    /// None, a boolean or a float: values no tensor record needs.
    Scalar,
    Int(i64),
    Str(String),
    /// `module`, `name`.
    Global(String, String),
    Tuple(Vec<Obj>),
    List(Vec<Obj>),
    Dict(Vec<(Obj, Obj)>),
    /// A REDUCE or NEWOBJ: callable, arguments.
    Call(Obj, Obj),
    /// A BUILD: object, state.
    Build(Obj, Obj),
    /// A persistent id (a tensor's storage).
    Pers(Obj),
}

/// A shared object and how deep it nests.
#[derive(Debug, Clone)]
pub struct Obj {
    pub node: Rc<Node>,
    depth: usize,
}

impl Obj {
    fn new(node: Node) -> Result<Obj, String> {
        let d = |o: &Obj| o.depth;
        let inner = match &node {
            Node::Tuple(v) | Node::List(v) => v.iter().map(d).max().unwrap_or(0),
            Node::Dict(v) => v.iter().map(|(k, x)| d(k).max(d(x))).max().unwrap_or(0),
            Node::Call(a, b) | Node::Build(a, b) => d(a).max(d(b)),
            Node::Pers(a) => d(a),
            _ => 0,
        };
        if inner + 1 > MAX_DEPTH {
            return Err(format!("objects nest deeper than {MAX_DEPTH} levels"));
        }
        Ok(Obj { node: Rc::new(node), depth: inner + 1 })
    }

    /// A call record (already checked parts, so it cannot nest too deep by much).
    pub fn call(f: Obj, args: Obj) -> Obj {
        let depth = f.depth.max(args.depth) + 1;
        Obj { node: Rc::new(Node::Call(f, args)), depth }
    }
}

/// The bytes being read, and where.
struct Bytes<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Bytes<'a> {
    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8], String> {
        let left = (self.b.len() - self.at) as u64;
        if n > left {
            return Err(format!("{what} of {n} bytes at byte {} runs past the end ({left} bytes left)", self.at));
        }
        let s = &self.b[self.at..self.at + n as usize];
        self.at += n as usize;
        Ok(s)
    }

    fn le(&mut self, n: u64, what: &str) -> Result<u64, String> {
        Ok(self.take(n, what)?.iter().rev().fold(0u64, |a, &x| (a << 8) | x as u64))
    }

    fn line(&mut self) -> Result<String, String> {
        let rest = &self.b[self.at..];
        let n = rest.iter().position(|&c| c == b'\n').ok_or("a GLOBAL name has no end")?;
        self.at += n + 1;
        Ok(String::from_utf8_lossy(&rest[..n]).into_owned())
    }

    /// A string after its length of `width` bytes.
    fn text(&mut self, width: u64) -> Result<Node, String> {
        let n = self.le(width, "a string's length")?;
        let s = self.take(n, "a string")?;
        Ok(Node::Str(String::from_utf8(s.to_vec()).map_err(|_| "a string is not UTF-8")?))
    }
}

/// The interpreter's state: the stack (`None` is a MARK), the memo, and the copying done.
struct Machine {
    stack: Vec<Option<Obj>>,
    memo: BTreeMap<u32, Obj>,
    copied: usize,
    budget: usize,
}

impl Machine {
    fn push(&mut self, node: Node) -> Result<(), String> {
        self.stack.push(Some(Obj::new(node)?));
        Ok(())
    }

    fn pop(&mut self) -> Result<Obj, String> {
        self.stack.pop().flatten().ok_or_else(|| "an opcode needs an object the stack does not hold".into())
    }

    fn pop_mark(&mut self) -> Result<Vec<Obj>, String> {
        let at = self.stack.iter().rposition(Option::is_none).ok_or("an opcode needs a MARK that is missing")?;
        let items = self.stack.split_off(at + 1);
        self.stack.pop();
        Ok(items.into_iter().flatten().collect())
    }

    fn memo_get(&mut self, id: u64) -> Result<(), String> {
        let o = self.memo.get(&(id as u32)).ok_or(format!("memo entry {id} is referenced before it is set"))?;
        self.stack.push(Some(o.clone()));
        Ok(())
    }

    fn memo_put(&mut self, id: u64) -> Result<(), String> {
        let top = self.stack.last().cloned().flatten().ok_or("a memo entry is set from an empty stack")?;
        self.memo.insert(id as u32, top);
        Ok(())
    }

    /// Adds `items` to the list or dict on top of the stack (copied first if it is shared).
    fn extend(&mut self, items: Vec<Obj>, pairs: bool) -> Result<(), String> {
        let top = self.pop()?;
        let mut node = Rc::try_unwrap(top.node).unwrap_or_else(|shared| {
            self.copied += 1 + match &*shared {
                Node::List(v) => v.len(),
                Node::Dict(v) => v.len(),
                _ => 0,
            };
            (*shared).clone()
        });
        if self.copied > self.budget {
            return Err("re-referenced objects are copied more than its size allows".into());
        }
        match (&mut node, pairs) {
            (Node::List(v), false) => v.extend(items),
            (Node::Dict(v), true) if items.len().is_multiple_of(2) => {
                let mut it = items.into_iter();
                while let (Some(k), Some(x)) = (it.next(), it.next()) {
                    v.push((k, x));
                }
            }
            _ => return Err("items are added to something that is not a list or dict".into()),
        }
        self.push(node)
    }

    fn reduce(&mut self, new_obj: bool) -> Result<(), String> {
        let args = self.pop()?;
        let f = self.pop()?;
        let ordered = matches!(&*f.node, Node::Global(m, n) if m == "collections"
            && (n == "OrderedDict" || n == "defaultdict"));
        if ordered && !new_obj {
            self.push(Node::Dict(Vec::new()))
        } else {
            self.push(Node::Call(f, args))
        }
    }

    fn build(&mut self) -> Result<(), String> {
        let state = self.pop()?;
        let obj = self.pop()?;
        if let (Node::Dict(a), Node::Dict(b)) = (&*obj.node, &*state.node) {
            self.copied += a.len() + b.len();
            return self.push(Node::Dict(a.iter().chain(b).cloned().collect()));
        }
        self.push(Node::Build(obj, state))
    }
}

/// Interprets a pickle; the object STOP leaves on the stack.
pub fn parse(b: &[u8]) -> Result<Obj, String> {
    let mut r = Bytes { b, at: 0 };
    let mut m = Machine { stack: Vec::new(), memo: BTreeMap::new(), copied: 0, budget: 16 * b.len() + (1 << 20) };
    loop {
        let at = r.at;
        let op = r.take(1, "an opcode")?[0];
        if op == b'.' {
            return m.pop();
        }
        match scalar(&mut r, op, at)? {
            Some(node) => m.push(node)?,
            None => m.structure(&mut r, op, at)?,
        }
    }
}

/// The object a scalar opcode pushes (a number, string, or name); `None` for other opcodes.
fn scalar(r: &mut Bytes, op: u8, at: usize) -> Result<Option<Node>, String> {
    Ok(Some(match op {
        b'N' | 0x88 | 0x89 => Node::Scalar,
        b'K' => Node::Int(r.le(1, "an int")? as i64),
        b'M' => Node::Int(r.le(2, "an int")? as i64),
        b'J' => Node::Int(r.le(4, "an int")? as u32 as i32 as i64),
        0x8a => {
            let n = r.le(1, "a long's length")?;
            if n > 8 {
                return Err(format!("a LONG1 of {n} bytes at byte {at} does not fit 64 bits"));
            }
            let v = r.le(n, "a long")?;
            // Two's complement in n bytes: sign-extend.
            let v = if n > 0 && n < 8 && v >> (8 * n - 1) & 1 == 1 { v | (!0u64 << (8 * n)) } else { v };
            Node::Int(v as i64)
        }
        b'G' => r.take(8, "a float").map(|_| Node::Scalar)?,
        b'X' => r.text(4)?,
        0x8c => r.text(1)?,
        0x8d => r.text(8)?,
        b'c' => Node::Global(r.line()?, r.line()?),
        _ => return Ok(None),
    }))
}

impl Machine {
    /// Opcodes that build on the stack or the memo.
    fn structure(&mut self, r: &mut Bytes, op: u8, at: usize) -> Result<(), String> {
        let m = self;
        match op {
            0x80 => drop(r.take(1, "a protocol")?),
            0x95 => drop(r.take(8, "a frame length")?),
            b'(' => m.stack.push(None),
            0x93 => {
                let (name, module) = (m.pop()?, m.pop()?);
                match (&*module.node, &*name.node) {
                    (Node::Str(a), Node::Str(b)) => m.push(Node::Global(a.clone(), b.clone()))?,
                    _ => return Err(format!("a STACK_GLOBAL at byte {at} names no module and class")),
                }
            }
            b'q' => m.memo_put(r.le(1, "a memo id")?)?,
            b'r' => m.memo_put(r.le(4, "a memo id")?)?,
            0x94 => m.memo_put(m.memo.len() as u64)?,
            b'h' => m.memo_get(r.le(1, "a memo id")?)?,
            b'j' => m.memo_get(r.le(4, "a memo id")?)?,
            b')' => m.push(Node::Tuple(Vec::new()))?,
            b']' => m.push(Node::List(Vec::new()))?,
            b'}' => m.push(Node::Dict(Vec::new()))?,
            b't' => {
                let items = m.pop_mark()?;
                m.push(Node::Tuple(items))?
            }
            0x85..=0x87 => {
                let items = m.pop_n((op - 0x84) as usize)?;
                m.push(Node::Tuple(items))?
            }
            b'd' => {
                let items = m.pop_mark()?;
                m.push(Node::Dict(Vec::new()))?;
                m.extend(items, true)?
            }
            b'a' => m.pop_n(1).and_then(|items| m.extend(items, false))?,
            b's' => m.pop_n(2).and_then(|items| m.extend(items, true))?,
            b'e' | b'u' => m.pop_mark().and_then(|items| m.extend(items, op == b'u'))?,
            b'R' | 0x81 => m.reduce(op == 0x81)?,
            b'b' => m.build()?,
            b'Q' => {
                let id = m.pop()?;
                m.push(Node::Pers(id))?
            }
            other => return Err(format!("opcode 0x{other:02x} at byte {at} is not one torch.save writes")),
        }
        Ok(())
    }

    /// The top `n` objects, in stack order.
    fn pop_n(&mut self, n: usize) -> Result<Vec<Obj>, String> {
        let mut items: Vec<Obj> = (0..n).map(|_| self.pop()).collect::<Result<_, _>>()?;
        items.reverse();
        Ok(items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_and_bombs_are_refused() {
        // A string claiming 4 GiB in a 7-byte pickle.
        assert!(parse(b"\x80\x02X\xff\xff\xff\xff.").unwrap_err().contains("runs past the end"));
        // Lists nested 100 deep.
        let deep: Vec<u8> = [b"\x80\x02".to_vec(), b"]".repeat(100), b"a".repeat(99), b".".to_vec()].concat();
        assert!(parse(&deep).unwrap_err().contains("deeper"));
        // A memo re-referenced twice per level, 40 levels: shared, so cheap, and then bounded.
        let mut bomb = b"\x80\x02]q\x00".to_vec();
        for _ in 0..40 {
            bomb.extend(b"(h\x00h\x00tq\x00");
        }
        bomb.push(b'.');
        assert!(parse(&bomb).is_ok());
        // A long of 255 bytes.
        assert!(parse(b"\x80\x02\x8a\xff.").unwrap_err().contains("64 bits"));
        assert_eq!(format!("{:?}", parse(b"\x8a\x01\xff.").unwrap().node), "Int(-1)");
    }
}
