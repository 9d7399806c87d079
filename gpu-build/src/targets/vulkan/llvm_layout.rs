//! The memory layout of LLVM-dialect types, read from their printed form, for the byte offsets
//! of `llvm.getelementptr` (`llvm_kernels.rs`): LLVM's default data layout, which is the
//! SPIR-V back end's and NVPTX's for these types — a scalar aligned to its size, a vector to
//! its size rounded up to a power of two, an array of its element's stride, a struct's fields
//! each at the next multiple of its alignment (none in a `packed` one), its size rounded up
//! to its largest alignment.

/// A type's size and alignment in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Layout {
    pub size: u64,
    pub align: u64,
}

impl Layout {
    /// The distance between two consecutive values of the type in memory (LLVM's alloc size).
    pub fn stride(self) -> u64 {
        self.size.div_ceil(self.align) * self.align
    }
}

/// What an index of a GEP steps into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Aggregate {
    /// An array or vector: every element of `element` type.
    Elements { element: String },
    /// A struct: each field's type and offset.
    Fields(Vec<(String, u64)>),
}

/// The layout of `ty` (`f32`, `vector<4xf32>`, `!llvm.array<4 x i32>`,
/// `!llvm.struct<(i32, f64)>`, `!llvm.ptr<1>`), or `None` for a type without one here (an
/// opaque or recursive struct, `i1`, a scalable vector).
pub(super) fn layout(ty: &str) -> Option<Layout> {
    let ty = ty.trim();
    if ty.starts_with("!llvm.ptr") {
        return Some(Layout { size: 8, align: 8 });
    }
    if let Some(bytes) = scalar_bytes(ty) {
        return Some(Layout {
            size: bytes,
            align: bytes,
        });
    }
    match aggregate(ty)? {
        Aggregate::Elements { element } => {
            let count = count(ty)?;
            let element = layout(&element)?;
            if ty.starts_with("vector<") {
                let size = count.checked_mul(element.size)?;
                Some(Layout {
                    size,
                    align: size.max(1).checked_next_power_of_two()?,
                })
            } else {
                Some(Layout {
                    size: count.checked_mul(element.stride())?,
                    align: element.align,
                })
            }
        }
        Aggregate::Fields(fields) => {
            let packed = struct_body(ty)?.0;
            let mut align = 1;
            let mut end = 0;
            for (field, offset) in &fields {
                let field = layout(field)?;
                if !packed {
                    align = align.max(field.align);
                }
                end = offset.checked_add(field.size)?;
            }
            Some(Layout {
                size: end.div_ceil(align) * align,
                align,
            })
        }
    }
}

/// What `ty`'s indices step into, for an array, vector or struct type.
pub(super) fn aggregate(ty: &str) -> Option<Aggregate> {
    let ty = ty.trim();
    if let Some(inner) = ty
        .strip_prefix("!llvm.array<")
        .and_then(|rest| rest.strip_suffix('>'))
    {
        let (_, element) = inner.split_once(" x ")?;
        return Some(Aggregate::Elements {
            element: element.trim().to_string(),
        });
    }
    if let Some(inner) = ty
        .strip_prefix("vector<")
        .and_then(|rest| rest.strip_suffix('>'))
    {
        let (count, element) = inner.split_once('x')?;
        count.trim().parse::<u64>().ok()?;
        return Some(Aggregate::Elements {
            element: element.trim().to_string(),
        });
    }
    let (packed, fields) = struct_body(ty)?;
    let mut placed = Vec::with_capacity(fields.len());
    let mut end = 0u64;
    for field in fields {
        let field_layout = layout(&field)?;
        let offset = if packed {
            end
        } else {
            end.div_ceil(field_layout.align) * field_layout.align
        };
        end = offset.checked_add(field_layout.size)?;
        placed.push((field, offset));
    }
    Some(Aggregate::Fields(placed))
}

/// Bytes of a scalar type, `None` for anything else (`i1` included: LLVM stores it in a byte
/// whose other bits are unspecified, which a kernel should not rely on).
fn scalar_bytes(ty: &str) -> Option<u64> {
    match ty {
        "f16" | "bf16" => Some(2),
        "f32" => Some(4),
        "f64" => Some(8),
        _ => {
            let bits: u64 = ty.strip_prefix('i')?.parse().ok()?;
            (bits >= 8 && bits.is_power_of_two()).then_some(bits / 8)
        }
    }
}

/// The element count of an array or vector type.
fn count(ty: &str) -> Option<u64> {
    let inner = ty
        .strip_prefix("!llvm.array<")
        .or_else(|| ty.strip_prefix("vector<"))?;
    let end = inner.find(|c: char| !c.is_ascii_digit())?;
    inner[..end].parse().ok()
}

/// A literal or named struct type's packedness and field types (`!llvm.struct<(i32, f32)>`,
/// `!llvm.struct<"pair", packed (i8, i32)>`); `None` for an opaque or recursive one.
fn struct_body(ty: &str) -> Option<(bool, Vec<String>)> {
    let mut inner = ty.strip_prefix("!llvm.struct<")?.strip_suffix('>')?.trim();
    if inner.starts_with('"') {
        let close = inner[1..].find('"')? + 1;
        inner = inner[close + 1..]
            .trim_start()
            .strip_prefix(',')?
            .trim_start();
    }
    let (packed, body) = match inner.strip_prefix("packed") {
        Some(rest) => (true, rest.trim_start()),
        None => (false, inner),
    };
    let body = body.strip_prefix('(')?.strip_suffix(')')?;
    Some((packed, split_top_level(body)))
}

/// `text` split at the commas outside any `<>`, `()` or `[]`.
fn split_top_level(text: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (at, c) in text.char_indices() {
        match c {
            '<' | '(' | '[' => depth += 1,
            '>' | ')' | ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(text[start..at].trim().to_string());
                start = at + 1;
            }
            _ => {}
        }
    }
    let last = text[start..].trim();
    if !last.is_empty() {
        parts.push(last.to_string());
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(size: u64, align: u64) -> Option<Layout> {
        Some(Layout { size, align })
    }

    #[test]
    fn scalars_vectors_and_arrays() {
        assert_eq!(layout("f32"), of(4, 4));
        assert_eq!(layout("i8"), of(1, 1));
        assert_eq!(layout("!llvm.ptr<1>"), of(8, 8));
        assert_eq!(layout("vector<4xf32>"), of(16, 16));
        // A 3-vector is 12 bytes aligned (and strided) to 16, as in LLVM's default layout.
        assert_eq!(layout("vector<3xf32>"), of(12, 16));
        assert_eq!(layout("!llvm.array<5 x vector<3xf32>>"), of(80, 16));
        assert_eq!(layout("!llvm.array<3 x !llvm.array<2 x i16>>"), of(12, 2));
        assert_eq!(layout("i1"), None);
        assert_eq!(layout("i24"), None);
    }

    #[test]
    fn structs_place_each_field_at_its_alignment_unless_packed() {
        assert_eq!(layout("!llvm.struct<(i8, f64, i16)>"), of(24, 8));
        assert_eq!(
            aggregate("!llvm.struct<(i8, f64, i16)>"),
            Some(Aggregate::Fields(vec![
                ("i8".into(), 0),
                ("f64".into(), 8),
                ("i16".into(), 16)
            ]))
        );
        assert_eq!(layout("!llvm.struct<packed (i8, f64, i16)>"), of(11, 1));
        assert_eq!(
            aggregate("!llvm.struct<\"pair\", (f32, !llvm.struct<(i8, i32)>)>"),
            Some(Aggregate::Fields(vec![
                ("f32".into(), 0),
                ("!llvm.struct<(i8, i32)>".into(), 4)
            ]))
        );
        assert_eq!(layout("!llvm.struct<\"opaque\", opaque>"), None);
    }
}
