//! Constructs that crash MLIR 22's parser (the process, not just the parse), found in the token
//! sequence before the parser sees the file, so each becomes an error at its line with the fix.
//!
//! Known so far (our fuzzer, `tests/tests/compile/fuzz.rs`, looks for more):
//! - a dense array attribute of `index` elements: `array<index: 1, 2>` (or through a type alias
//!   of `index`, `!t = index` … `array<!t: 1>`) — MLIR 22's `DenseArrayAttr` parser takes the
//!   element type's bit width, which `index` has none of, and dereferences a null storage
//!   (`mlir-opt-22` crashes on `func.func @f() attributes {x = array<index: 1>} { return }`).
//!   The natural typo is `known_block_size = array<index: 256, 1, 1>` for `array<i32: …>`.

/// One token: where it starts (a byte offset) and its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Token<'a> {
    offset: usize,
    text: &'a str,
}

/// A construct MLIR 22's parser would crash on: where (a byte offset) and what to tell the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParserCrash {
    pub offset: usize,
    pub message: String,
}

/// The first construct of `text` known to crash MLIR 22's parser, if any.
pub(crate) fn find(text: &str) -> Option<ParserCrash> {
    let tokens = tokens(text);
    let index_aliases = index_type_aliases(&tokens);
    tokens.windows(3).find_map(|window| {
        let [array, open, element] = window else {
            return None;
        };
        if array.text != "array" || open.text != "<" {
            return None;
        }
        let through = if element.text == "index" {
            String::new()
        } else if index_aliases.contains(&element.text) {
            format!(" (`{}` is an alias of `index`)", element.text)
        } else {
            return None;
        };
        Some(ParserCrash {
            offset: element.offset,
            message: format!(
                "a dense array attribute cannot hold `index` elements{through} (MLIR 22 crashes \
                 on it); write array<i32: …> or array<i64: …>"
            ),
        })
    })
}

/// The type aliases (`!name = index`, or an alias of one) that name `index`.
fn index_type_aliases<'a>(tokens: &[Token<'a>]) -> Vec<&'a str> {
    let definitions: Vec<(&str, &str)> = tokens
        .windows(3)
        .filter(|w| w[0].text.starts_with('!') && w[1].text == "=")
        .map(|w| (w[0].text, w[2].text))
        .collect();
    let mut aliases: Vec<&str> = Vec::new();
    // An alias may name an alias defined anywhere before it; each round resolves one more link.
    loop {
        let before = aliases.len();
        for &(name, value) in &definitions {
            if !aliases.contains(&name) && (value == "index" || aliases.contains(&value)) {
                aliases.push(name);
            }
        }
        if aliases.len() == before {
            return aliases;
        }
    }
}

/// MLIR's tokens, as far as these checks need them: identifiers (bare, or prefixed by `!`, `#`,
/// `%`, `@` or `^`, with `.` and `$` inside), numbers, and punctuation one character each.
/// Strings and `//` comments are skipped: nothing in them is parsed as MLIR.
fn tokens(text: &str) -> Vec<Token<'_>> {
    let bytes = text.as_bytes();
    let is_identifier = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'$' | b'-');
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b if b.is_ascii_whitespace() => {
                i += 1;
                continue;
            }
            b'!' | b'#' | b'%' | b'@' | b'^'
                if bytes.get(i + 1).is_some_and(|&b| is_identifier(b)) =>
            {
                i += 1;
                while i < bytes.len() && is_identifier(bytes[i]) {
                    i += 1;
                }
            }
            // `-` starts no identifier (`->`, negative numbers): it is punctuation there.
            b if is_identifier(b) && b != b'-' => {
                while i < bytes.len() && is_identifier(bytes[i]) && bytes[i] != b'-' {
                    i += 1;
                }
            }
            _ => i += text[i..].chars().next().map_or(1, char::len_utf8),
        }
        tokens.push(Token {
            offset: start,
            text: &text[start..i.min(text.len())],
        });
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column_of(text: &str) -> Option<usize> {
        find(text).map(|crash| crash.offset + 1)
    }

    #[test]
    fn finds_index_dense_arrays_however_they_are_spaced() {
        let one_line = "func.func @f() attributes {x = array<index: 1>} { return }";
        assert_eq!(column_of(one_line), Some(38));
        assert_eq!(column_of("x = array<index>"), Some(11));
        assert_eq!(column_of("x = array< index : 1, 2>"), Some(12));
        assert_eq!(column_of("x = array<\n  index:1>"), Some(14));
        let message = find(one_line).unwrap().message;
        assert!(
            message.contains("write array<i32: …> or array<i64: …>"),
            "{message}"
        );
    }

    #[test]
    fn finds_aliases_of_index_and_chains_of_them() {
        let text = "!a = index\n!b = !a\nfunc.func @f() attributes {x = array<!b: 1>}";
        let crash = find(text).unwrap();
        assert_eq!(&text[crash.offset..crash.offset + 2], "!b");
        assert!(
            crash.message.contains("`!b` is an alias of `index`"),
            "{}",
            crash.message
        );
        assert_eq!(find("!a = i32\nx = array<!a: 1>"), None);
    }

    #[test]
    fn leaves_everything_else_alone() {
        for fine in [
            "x = array<i32: 1, 2>",
            "x = array<i64>",
            "x = dense<1> : tensor<2xindex>",
            "%array = arith.constant 0 : index",
            "x = #foo.array<index>",
            "x = \"array<index: 1>\"",
            "// array<index: 1>\n",
            "x = my.array<index: 1>",
            "memref<?xindex>",
        ] {
            assert_eq!(find(fine), None, "{fine}");
        }
    }
}
