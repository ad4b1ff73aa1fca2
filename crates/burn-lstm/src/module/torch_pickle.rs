//! The pickle inside a `torch.save` file (`data.pkl`), read without running anything:
//! a small pickle machine that knows the opcodes `torch.save` writes (protocols 2 to 4)
//! and builds values, never objects. Tensors (`torch._utils._rebuild_tensor_v2` and the
//! `Parameter` wrappers) become [`TensorMeta`], storages (persistent ids) their key and
//! type, dicts (`dict`, `OrderedDict`) dicts; any other class or function call becomes
//! an [`Value::Object`] that only names it. Damaged input is an error, never a panic,
//! and nothing is allocated beyond what the pickle's own bytes hold.

use std::rc::Rc;

/// A storage's element type, from the storage class (`torch.FloatStorage`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StorageType {
    F64,
    F32,
    F16,
    BF16,
    I64,
    I32,
    I16,
    I8,
    U8,
    Bool,
}

impl StorageType {
    fn from_class(name: &str) -> Option<Self> {
        Some(match name {
            "DoubleStorage" => Self::F64,
            "FloatStorage" => Self::F32,
            "HalfStorage" => Self::F16,
            "BFloat16Storage" => Self::BF16,
            "LongStorage" => Self::I64,
            "IntStorage" => Self::I32,
            "ShortStorage" => Self::I16,
            "CharStorage" => Self::I8,
            "ByteStorage" | "UntypedStorage" => Self::U8,
            "BoolStorage" => Self::Bool,
            _ => return None,
        })
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Self::F64 | Self::I64 => 8,
            Self::F32 | Self::I32 => 4,
            Self::F16 | Self::BF16 | Self::I16 => 2,
            Self::I8 | Self::U8 | Self::Bool => 1,
        }
    }
}

/// A storage of the file: its entry `data/{key}` holds `len` elements of `dtype`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StorageRef {
    pub key: Rc<str>,
    pub dtype: StorageType,
    pub len: u64,
}

/// A tensor: a view (`offset`, `shape`, `strides`, in elements) of a storage.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TensorMeta {
    pub storage: StorageRef,
    pub offset: u64,
    pub shape: Vec<u64>,
    pub strides: Vec<u64>,
}

/// A value the pickle builds. Containers live in the machine's arena (shared, as the
/// pickle's memo shares them); strings and tensors are reference-counted, so copying a
/// value is cheap whatever the pickle repeats.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Rc<str>),
    Bytes(Rc<[u8]>),
    /// A tuple, list or set: arena index.
    Seq(usize),
    /// A dict: arena index.
    Dict(usize),
    /// A class or function the pickle names (`module`, `name`).
    Global(Rc<str>, Rc<str>),
    Storage(StorageRef),
    Tensor(Rc<TensorMeta>),
    /// An object of a class this reader does not build (or a value it does not keep:
    /// a big integer), by the module and name of its class.
    Object(Rc<str>, Rc<str>),
    /// The stack's mark (an internal value).
    Mark,
}

impl Value {
    /// What the value is, in words (for errors).
    pub fn kind(&self) -> String {
        match self {
            Value::None => "None".into(),
            Value::Bool(_) => "a bool".into(),
            Value::Int(_) => "an integer".into(),
            Value::Float(_) => "a float".into(),
            Value::Str(_) => "a string".into(),
            Value::Bytes(_) => "bytes".into(),
            Value::Seq(_) => "a tuple or list".into(),
            Value::Dict(_) => "a dict".into(),
            Value::Global(m, n) => format!("the class or function {m}.{n}"),
            Value::Storage(_) => "a storage".into(),
            Value::Tensor(_) => "a tensor".into(),
            Value::Object(m, n) => format!("a {m}.{n} object"),
            Value::Mark => "a mark".into(),
        }
    }
}

/// A container of the arena.
#[derive(Debug)]
pub(crate) enum Container {
    Seq(Vec<Value>),
    Dict(Vec<(Value, Value)>),
}

/// The decoded pickle: its root value and the arena its containers live in.
#[derive(Debug)]
pub(crate) struct Pickle {
    pub root: Value,
    pub arena: Vec<Container>,
}

impl Pickle {
    /// The items of the dict `id` (empty for another container).
    pub fn dict(&self, id: usize) -> &[(Value, Value)] {
        match self.arena.get(id) {
            Some(Container::Dict(items)) => items,
            _ => &[],
        }
    }
}

/// Decodes `data` (the whole of `data.pkl`). Errors name the opcode's byte offset.
pub(crate) fn decode(data: &[u8]) -> Result<Pickle, String> {
    let mut machine = Machine {
        data,
        at: 0,
        copies_left: data.len().saturating_mul(8).max(1 << 20),
        stack: Vec::new(),
        memo: std::collections::HashMap::new(),
        arena: Vec::new(),
    };
    let root = machine.run()?;
    Ok(Pickle {
        root,
        arena: machine.arena,
    })
}

struct Machine<'a> {
    data: &'a [u8],
    at: usize,
    /// Values copied out of containers so far may not exceed this (shared containers
    /// copied again and again would otherwise grow with the square of the pickle).
    copies_left: usize,
    stack: Vec<Value>,
    memo: std::collections::HashMap<u32, Value>,
    arena: Vec<Container>,
}

impl Machine<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.data.len())
            .ok_or_else(|| {
                format!(
                    "the pickle ends at byte {} where {n} more bytes were expected",
                    self.data.len()
                )
            })?;
        let bytes = &self.data[self.at..end];
        self.at = end;
        Ok(bytes)
    }

    /// Counts `n` values copied out of a container.
    fn charge(&mut self, n: usize) -> Result<(), String> {
        self.copies_left = self
            .copies_left
            .checked_sub(n)
            .ok_or("more copies of shared values than the pickle's size allows")?;
        Ok(())
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, String> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, String> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    /// A length read from the pickle, as `usize` (the bytes it announces are checked by
    /// `take`, so no length allocates more than the pickle holds).
    fn len(&mut self, width: u8) -> Result<usize, String> {
        let n = match width {
            1 => u64::from(self.u8()?),
            4 => u64::from(self.u32()?),
            _ => self.u64()?,
        };
        usize::try_from(n).map_err(|_| format!("a length of {n} bytes"))
    }

    /// A newline-terminated line (GLOBAL's module and name).
    fn line(&mut self) -> Result<Rc<str>, String> {
        let rest = &self.data[self.at..];
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or("a GLOBAL without its newline")?;
        if end > MAX_NAME {
            return Err(format!("a class name of {end} bytes"));
        }
        let text =
            std::str::from_utf8(&rest[..end]).map_err(|_| "a GLOBAL name that is not UTF-8")?;
        self.at += end + 1;
        Ok(text.into())
    }

    fn text(&mut self, n: usize) -> Result<Value, String> {
        let bytes = self.take(n)?;
        let text = std::str::from_utf8(bytes).map_err(|_| "a string that is not UTF-8")?;
        Ok(Value::Str(text.into()))
    }

    fn pop(&mut self) -> Result<Value, String> {
        match self.stack.pop() {
            Some(Value::Mark) | None => Err("an opcode with too few values on the stack".into()),
            Some(v) => Ok(v),
        }
    }

    fn top(&mut self) -> Result<&mut Value, String> {
        match self.stack.last_mut() {
            Some(Value::Mark) | None => Err("an opcode with no value on the stack".into()),
            Some(v) => Ok(v),
        }
    }

    /// The values above the topmost mark, the mark removed.
    fn pop_mark(&mut self) -> Result<Vec<Value>, String> {
        let mark = self
            .stack
            .iter()
            .rposition(|v| *v == Value::Mark)
            .ok_or("an opcode that needs a mark, with none on the stack")?;
        let items = self.stack.split_off(mark + 1);
        self.stack.pop();
        Ok(items)
    }

    fn new_container(&mut self, container: Container) -> usize {
        self.arena.push(container);
        self.arena.len() - 1
    }

    fn seq(&mut self, items: Vec<Value>) -> Value {
        Value::Seq(self.new_container(Container::Seq(items)))
    }

    fn dict(&mut self, items: Vec<(Value, Value)>) -> Value {
        Value::Dict(self.new_container(Container::Dict(items)))
    }

    /// The elements of a sequence value.
    fn elements(&self, value: &Value) -> Option<&[Value]> {
        match value {
            Value::Seq(id) => match &self.arena[*id] {
                Container::Seq(items) => Some(items),
                _ => None,
            },
            _ => None,
        }
    }

    fn append(&mut self, target: &Value, items: Vec<Value>) -> Result<(), String> {
        match target {
            Value::Seq(id) => match &mut self.arena[*id] {
                Container::Seq(seq) => {
                    seq.extend(items);
                    Ok(())
                }
                _ => Err("APPEND to a value that is not a list".into()),
            },
            // Appending to an object this reader does not build: its items are dropped.
            Value::Object(..) => Ok(()),
            other => Err(format!("APPEND to {}", other.kind())),
        }
    }

    fn set_items(&mut self, target: &Value, items: Vec<Value>) -> Result<(), String> {
        if !items.len().is_multiple_of(2) {
            return Err("SETITEMS with an odd number of values".into());
        }
        let mut pairs = Vec::with_capacity(items.len() / 2);
        let mut it = items.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            pairs.push((k, v));
        }
        match target {
            Value::Dict(id) => match &mut self.arena[*id] {
                // In order: a later value under a key already set replaces the earlier
                // one where the dict is read (`torch_file`), as in Python.
                Container::Dict(dict) => {
                    dict.extend(pairs);
                    Ok(())
                }
                _ => Err("SETITEM on a value that is not a dict".into()),
            },
            Value::Object(..) => Ok(()),
            other => Err(format!("SETITEM on {}", other.kind())),
        }
    }

    fn run(&mut self) -> Result<Value, String> {
        loop {
            let start = self.at;
            let op = self.u8()?;
            self.step(op)
                .map_err(|e| format!("{e} (opcode 0x{op:02x} at byte {start})"))?;
            if op == b'.' {
                let root = self.pop()?;
                return Ok(root);
            }
        }
    }

    fn step(&mut self, op: u8) -> Result<(), String> {
        match op {
            // PROTO, FRAME: nothing to do (frames are read as plain bytes).
            0x80 => {
                self.u8()?;
            }
            0x95 => {
                self.u64()?;
            }
            b'.' => {}
            b'(' => self.stack.push(Value::Mark),
            b'N' => self.stack.push(Value::None),
            0x88 => self.stack.push(Value::Bool(true)),
            0x89 => self.stack.push(Value::Bool(false)),
            b'J' => {
                let v = self.u32()? as i32;
                self.stack.push(Value::Int(i64::from(v)));
            }
            b'K' => {
                let v = self.u8()?;
                self.stack.push(Value::Int(i64::from(v)));
            }
            b'M' => {
                let v = self.u16()?;
                self.stack.push(Value::Int(i64::from(v)));
            }
            // LONG1: a little-endian two's complement integer of up to 8 bytes here.
            // LONG1, LONG4: little-endian two's complement; one of more than 8 bytes (a
            // seed of 2^63 or more) is only named.
            0x8a | 0x8b => {
                let n = self.len(if op == 0x8a { 1 } else { 4 })?;
                let bytes = self.take(n)?;
                if n > 8 {
                    self.stack
                        .push(Value::Object("builtins".into(), "int".into()));
                    return Ok(());
                }
                let mut buf = if bytes.last().is_some_and(|b| b & 0x80 != 0) {
                    [0xff; 8]
                } else {
                    [0; 8]
                };
                buf[..n].copy_from_slice(bytes);
                self.stack.push(Value::Int(i64::from_le_bytes(buf)));
            }
            b'G' => {
                let b = self.take(8)?;
                let v = f64::from_be_bytes(b.try_into().expect("8 bytes"));
                self.stack.push(Value::Float(v));
            }
            b'X' => {
                let n = self.len(4)?;
                let v = self.text(n)?;
                self.stack.push(v);
            }
            0x8c => {
                let n = self.len(1)?;
                let v = self.text(n)?;
                self.stack.push(v);
            }
            0x8d => {
                let n = self.len(8)?;
                let v = self.text(n)?;
                self.stack.push(v);
            }
            // BINSTRING, SHORT_BINSTRING (Python 2 strings), BINBYTES, SHORT_BINBYTES,
            // BINBYTES8: bytes.
            b'T' | b'B' | b'U' | b'C' | 0x8e | 0x96 => {
                let width = match op {
                    b'T' | b'B' => 4,
                    b'U' | b'C' => 1,
                    _ => 8,
                };
                let n = self.len(width)?;
                let bytes: Rc<[u8]> = self.take(n)?.into();
                self.stack.push(Value::Bytes(bytes));
            }
            b')' => {
                let v = self.seq(Vec::new());
                self.stack.push(v);
            }
            0x85..=0x87 => {
                let n = usize::from(op - 0x84);
                if self.stack.len() < n {
                    return Err("TUPLE with too few values".into());
                }
                let items = self.stack.split_off(self.stack.len() - n);
                if items.contains(&Value::Mark) {
                    return Err("TUPLE over a mark".into());
                }
                let v = self.seq(items);
                self.stack.push(v);
            }
            b't' | b'l' | 0x91 => {
                let items = self.pop_mark()?;
                let v = self.seq(items);
                self.stack.push(v);
            }
            b']' | 0x8f => {
                let v = self.seq(Vec::new());
                self.stack.push(v);
            }
            b'}' => {
                let v = self.dict(Vec::new());
                self.stack.push(v);
            }
            b'd' => {
                let items = self.pop_mark()?;
                let v = self.dict(Vec::new());
                self.set_items(&v, items)?;
                self.stack.push(v);
            }
            b'a' => {
                let item = self.pop()?;
                let target = self.top()?.clone();
                self.append(&target, vec![item])?;
            }
            b'e' | 0x90 => {
                let items = self.pop_mark()?;
                let target = self.top()?.clone();
                self.append(&target, items)?;
            }
            b's' => {
                let value = self.pop()?;
                let key = self.pop()?;
                let target = self.top()?.clone();
                self.set_items(&target, vec![key, value])?;
            }
            b'u' => {
                let items = self.pop_mark()?;
                let target = self.top()?.clone();
                self.set_items(&target, items)?;
            }
            b'0' => {
                self.stack.pop().ok_or("POP on an empty stack")?;
            }
            b'1' => {
                self.pop_mark()?;
            }
            b'2' => {
                let v = self.top()?.clone();
                self.stack.push(v);
            }
            // BINPUT, LONG_BINPUT, MEMOIZE.
            b'q' | b'r' | 0x94 => {
                let key = match op {
                    b'q' => u32::from(self.u8()?),
                    b'r' => self.u32()?,
                    _ => u32::try_from(self.memo.len()).map_err(|_| "a memo too large")?,
                };
                let v = self.top()?.clone();
                self.memo.insert(key, v);
            }
            b'h' | b'j' => {
                let key = if op == b'h' {
                    u32::from(self.u8()?)
                } else {
                    self.u32()?
                };
                let v = self
                    .memo
                    .get(&key)
                    .cloned()
                    .ok_or_else(|| format!("memo {key} read before it was written"))?;
                self.stack.push(v);
            }
            b'c' => {
                let module = self.line()?;
                let name = self.line()?;
                self.stack.push(Value::Global(module, name));
            }
            0x93 => {
                let name = self.pop()?;
                let module = self.pop()?;
                match (module, name) {
                    (Value::Str(module), Value::Str(name))
                        if module.len() <= MAX_NAME && name.len() <= MAX_NAME =>
                    {
                        self.stack.push(Value::Global(module, name));
                    }
                    _ => return Err("STACK_GLOBAL without two strings".into()),
                }
            }
            b'Q' => {
                let pid = self.pop()?;
                let storage = self.storage(&pid)?;
                self.stack.push(storage);
            }
            b'R' => {
                let args = self.pop()?;
                let callable = self.pop()?;
                let v = self.call(&callable, &args)?;
                self.stack.push(v);
            }
            // NEWOBJ: `cls.__new__(cls, *args)`, an object of that class.
            0x81 => {
                self.pop()?;
                let class = self.pop()?;
                let v = self.instance(&class);
                self.stack.push(v);
            }
            // NEWOBJ_EX: the same with keyword arguments.
            0x92 => {
                self.pop()?;
                self.pop()?;
                let class = self.pop()?;
                let v = self.instance(&class);
                self.stack.push(v);
            }
            // BUILD: an object's state; this reader keeps no object state (a state dict's
            // `_metadata` included).
            b'b' => {
                self.pop()?;
                self.top()?;
            }
            other => {
                return Err(format!(
                    "an opcode torch.save does not write (0x{other:02x})"
                ));
            }
        }
        Ok(())
    }

    /// A storage from its persistent id `('storage', type, key, location, numel)`; a
    /// storage of a type not read (complex, quantized) is only named.
    fn storage(&self, pid: &Value) -> Result<Value, String> {
        let bad = || "a persistent id that is not a torch storage".to_string();
        let items = self.elements(pid).ok_or_else(bad)?;
        match items {
            [
                Value::Str(tag),
                Value::Global(module, class),
                Value::Str(key),
                _,
                Value::Int(len),
            ] if &**tag == "storage" => {
                let Some(dtype) = StorageType::from_class(class) else {
                    return Ok(Value::Object(module.clone(), class.clone()));
                };
                let len =
                    u64::try_from(*len).map_err(|_| format!("a storage of {len} elements"))?;
                Ok(Value::Storage(StorageRef {
                    key: key.clone(),
                    dtype,
                    len,
                }))
            }
            _ => Err(bad()),
        }
    }

    /// An object of `class` (a dict for the dict classes).
    fn instance(&mut self, class: &Value) -> Value {
        match class {
            Value::Global(m, n) if is_dict_class(m, n) => self.dict(Vec::new()),
            Value::Global(m, n) => Value::Object(m.clone(), n.clone()),
            _ => unnamed(),
        }
    }

    /// `callable(*args)` for the callables `torch.save` uses for dicts and tensors; an
    /// [`Value::Object`] naming any other.
    fn call(&mut self, callable: &Value, args: &Value) -> Result<Value, String> {
        let Value::Global(module, name) = callable else {
            return Ok(unnamed());
        };
        let known = is_dict_class(module, name)
            || matches!(
                (&**module, &**name),
                (
                    "torch._utils",
                    "_rebuild_tensor_v2"
                        | "_rebuild_tensor"
                        | "_rebuild_parameter"
                        | "_rebuild_parameter_with_state"
                ) | ("torch._tensor", "_rebuild_from_type_v2")
            );
        // Any other call is only named: its arguments are not even copied.
        if !known {
            return Ok(Value::Object(module.clone(), name.clone()));
        }
        let args: Vec<Value> = self
            .elements(args)
            .ok_or("REDUCE with arguments that are not a tuple")?
            .to_vec();
        self.charge(args.len())?;
        match (&**module, &**name) {
            (m, n) if is_dict_class(m, n) => {
                let dict = self.dict(Vec::new());
                // `OrderedDict([(key, value), ...])`.
                if let Some(items) = args.first().and_then(|a| self.elements(a)) {
                    let copies = items.len() * 2;
                    let mut flat = Vec::with_capacity(items.len() * 2);
                    for pair in items {
                        match self.elements(pair) {
                            Some([k, v]) => flat.extend([k.clone(), v.clone()]),
                            _ => return Err("a dict built from items that are not pairs".into()),
                        }
                    }
                    self.charge(copies)?;
                    self.set_items(&dict, flat)?;
                }
                Ok(dict)
            }
            // A storage of a type not read (complex, quantized) makes a tensor that is
            // only named.
            ("torch._utils", "_rebuild_tensor_v2" | "_rebuild_tensor") => match args.first() {
                Some(Value::Storage(_)) => self.tensor(&args).map(|t| Value::Tensor(Rc::new(t))),
                Some(object @ Value::Object(..)) => Ok(object.clone()),
                _ => Err("a tensor rebuilt from something that is not a storage".into()),
            },
            // nn.Parameter: its data.
            ("torch._utils", "_rebuild_parameter" | "_rebuild_parameter_with_state") => {
                match args.first() {
                    Some(v @ (Value::Tensor(_) | Value::Object(..))) => Ok(v.clone()),
                    _ => Err("a parameter whose data is not a tensor".into()),
                }
            }
            // A tensor of a subclass: `func(*args)` for a `torch._utils` rebuild (which
            // does not come back here), then its type and state dropped.
            ("torch._tensor", "_rebuild_from_type_v2") => match args.as_slice() {
                [func @ Value::Global(m, _), _, inner, ..] if &**m == "torch._utils" => {
                    self.call(func, inner)
                }
                [_, ..] => Ok(Value::Object(module.clone(), name.clone())),
                [] => Err("_rebuild_from_type_v2 without arguments".into()),
            },
            _ => Ok(Value::Object(module.clone(), name.clone())),
        }
    }

    /// `_rebuild_tensor_v2(storage, offset, size, stride, ...)`.
    fn tensor(&self, args: &[Value]) -> Result<TensorMeta, String> {
        let ints = |v: &Value, what: &str| -> Result<Vec<u64>, String> {
            let dims = self
                .elements(v)
                .ok_or_else(|| format!("a tensor whose {what} is not a tuple"))?;
            if dims.len() > MAX_DIMS {
                return Err(format!("a tensor of {} dimensions", dims.len()));
            }
            dims.iter()
                .map(|d| match d {
                    Value::Int(n) => u64::try_from(*n).map_err(|_| format!("a tensor {what} {n}")),
                    other => Err(format!("a tensor {what} holding {}", other.kind())),
                })
                .collect()
        };
        match args {
            [
                Value::Storage(storage),
                Value::Int(offset),
                size,
                stride,
                ..,
            ] => {
                let shape = ints(size, "size")?;
                let strides = ints(stride, "stride")?;
                if shape.len() != strides.len() {
                    return Err(format!(
                        "a tensor of {} dimensions with {} strides",
                        shape.len(),
                        strides.len()
                    ));
                }
                Ok(TensorMeta {
                    storage: storage.clone(),
                    offset: u64::try_from(*offset)
                        .map_err(|_| format!("a tensor offset {offset}"))?,
                    shape,
                    strides,
                })
            }
            _ => Err(
                "a tensor rebuilt from arguments that are not (storage, offset, size, stride)"
                    .into(),
            ),
        }
    }
}

/// Longest class or module name read (bytes).
const MAX_NAME: usize = 1024;
/// Most dimensions a tensor may have.
const MAX_DIMS: usize = 64;

/// An object of no class the pickle names.
fn unnamed() -> Value {
    Value::Object("".into(), "?".into())
}

fn is_dict_class(module: &str, name: &str) -> bool {
    matches!(
        (module, name),
        ("collections", "OrderedDict") | ("builtins" | "__builtin__", "dict")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state dict of one float tensor `w` of shape [2, 3], as protocol 2 writes it.
    fn state_dict() -> Vec<u8> {
        let mut p = vec![0x80, 2];
        p.extend(b"ccollections\nOrderedDict\nq\x00)Rq\x01");
        p.extend(b"X\x01\x00\x00\x00w");
        p.extend(b"ctorch._utils\n_rebuild_tensor_v2\nq\x02(");
        p.extend(b"(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x06tQ");
        p.extend(b"K\x00K\x02K\x03\x86K\x03K\x01\x86\x89h\x00)RtR");
        p.extend(b"s.");
        p
    }

    #[test]
    fn a_state_dict_decodes_to_a_dict_of_tensors() {
        let pickle = decode(&state_dict()).unwrap();
        let Value::Dict(id) = pickle.root else {
            panic!("{:?}", pickle.root)
        };
        let items = pickle.dict(id);
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].0, Value::Str("w".into()));
        let Value::Tensor(t) = &items[0].1 else {
            panic!("{:?}", items[0].1)
        };
        assert_eq!(
            **t,
            TensorMeta {
                storage: StorageRef {
                    key: "0".into(),
                    dtype: StorageType::F32,
                    len: 6
                },
                offset: 0,
                shape: vec![2, 3],
                strides: vec![3, 1],
            }
        );
    }

    #[test]
    fn every_cut_and_every_flipped_byte_is_an_error_or_a_value_never_a_panic() {
        let bytes = state_dict();
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for at in 0..bytes.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut copy = bytes.clone();
                copy[at] ^= flip;
                let _ = decode(&copy);
            }
        }
    }

    #[test]
    fn shared_values_copied_again_and_again_run_out_of_budget() {
        // OrderedDict(pairs) M times over one memoized list of N pairs: each call
        // copies 2N values, M calls far more than the pickle's size.
        let mut p =
            b"\x80\x02ccollections\nOrderedDict\nq\x00X\x01\x00\x00\x00kK\x01\x86q\x01(".to_vec();
        for _ in 0..2000 {
            p.extend(b"h\x01");
        }
        p.extend(b"l\x85q\x02");
        for _ in 0..300 {
            p.extend(b"h\x00h\x02R0");
        }
        p.extend(b"N.");
        let e = decode(&p).unwrap_err();
        assert!(e.contains("more copies of shared values"), "{e}");
        // The same a few times decodes.
        let mut q = p[..p.len() - 300 * 6 - 2].to_vec();
        q.extend(b"h\x00h\x02R.");
        assert!(matches!(decode(&q).unwrap().root, Value::Dict(_)));
    }

    #[test]
    fn values_not_kept_are_named_not_refused() {
        // An integer of 9 bytes (a seed of 2^64), a storage of complex numbers.
        let big = decode(b"\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.").unwrap();
        assert_eq!(big.root, Value::Object("builtins".into(), "int".into()));
        let complex = decode(b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\nComplexFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x02tQK\x00K\x02\x85K\x01\x85\x89}tR.").unwrap();
        assert_eq!(
            complex.root,
            Value::Object("torch".into(), "ComplexFloatStorage".into())
        );
    }

    #[test]
    fn unknown_classes_are_named_never_built() {
        // `__main__.Model()` then a BUILD with its state: an object named, nothing run.
        let pickle = decode(b"\x80\x02c__main__\nModel\nq\x00)\x81}b.").unwrap();
        assert_eq!(
            pickle.root,
            Value::Object("__main__".into(), "Model".into())
        );
        let e = decode(b"\x80\x02\xff.").unwrap_err();
        assert!(e.contains("0xff") && e.contains("at byte 2"), "{e}");
        let e = decode(b"\x80\x02h\x05.").unwrap_err();
        assert!(e.contains("memo 5 read before it was written"), "{e}");
        // A length far beyond the pickle allocates nothing.
        let e = decode(b"\x80\x02X\xff\xff\xff\xff.").unwrap_err();
        assert!(e.contains("4294967295 more bytes"), "{e}");
    }
}
