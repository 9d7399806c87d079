//! A reader for the printed form of target attributes (`#nvvm.target<O = 3, chip = "sm_90",
//! flags = {fast}, link = ["lib.bc"]>`). MLIR's C API has no accessors for these attributes, but
//! MLIR has already parsed and verified them, so their printed form is canonical and small.

/// A parameter value of a target attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    Str(String),
    Int(i64),
    /// A key without a value inside a dictionary (`{fast}`).
    Unit,
    Array(Vec<Value>),
    Dict(Vec<(String, Value)>),
}

/// `#nvvm.target<...>` split into its name (`nvvm.target`) and parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TargetAttr {
    pub name: String,
    pub params: Vec<(String, Value)>,
}

/// Splits a printed `ArrayAttr` of targets (`[#nvvm.target, #rocdl.target<chip = "gfx90a">]`).
pub(crate) fn parse_target_list(text: &str) -> Result<Vec<TargetAttr>, String> {
    let mut parser = Parser {
        text: text.as_bytes(),
        pos: 0,
    };
    parser.consume(b'[')?;
    let mut targets = Vec::new();
    parser.skip_space();
    if parser.eat(b']') {
        return Ok(targets);
    }
    loop {
        targets.push(parser.target()?);
        parser.skip_space();
        if parser.eat(b']') {
            return Ok(targets);
        }
        parser.consume(b',')?;
    }
}

struct Parser<'a> {
    text: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn target(&mut self) -> Result<TargetAttr, String> {
        self.consume(b'#')?;
        let name = self.identifier()?;
        let mut params = Vec::new();
        self.skip_space();
        if self.eat(b'<') {
            loop {
                self.skip_space();
                let key = self.key()?;
                self.consume(b'=')?;
                params.push((key, self.value()?));
                self.skip_space();
                if self.eat(b'>') {
                    break;
                }
                self.consume(b',')?;
            }
        }
        Ok(TargetAttr { name, params })
    }

    fn value(&mut self) -> Result<Value, String> {
        self.skip_space();
        match self.peek() {
            Some(b'"') => Ok(Value::Str(self.string()?)),
            Some(b'[') => {
                self.pos += 1;
                let mut items = Vec::new();
                self.skip_space();
                if !self.eat(b']') {
                    loop {
                        items.push(self.value()?);
                        self.skip_space();
                        if self.eat(b']') {
                            break;
                        }
                        self.consume(b',')?;
                    }
                }
                Ok(Value::Array(items))
            }
            Some(b'{') => {
                self.pos += 1;
                let mut entries = Vec::new();
                self.skip_space();
                if !self.eat(b'}') {
                    loop {
                        self.skip_space();
                        let key = self.key()?;
                        self.skip_space();
                        let value = if self.eat(b'=') {
                            self.value()?
                        } else {
                            Value::Unit
                        };
                        entries.push((key, value));
                        self.skip_space();
                        if self.eat(b'}') {
                            break;
                        }
                        self.consume(b',')?;
                    }
                }
                Ok(Value::Dict(entries))
            }
            Some(c) if c == b'-' || c.is_ascii_digit() => {
                let start = self.pos;
                self.pos += 1;
                while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    self.pos += 1;
                }
                let digits = std::str::from_utf8(&self.text[start..self.pos]).unwrap_or_default();
                let value = digits
                    .parse()
                    .map_err(|_| format!("bad integer `{digits}`"))?;
                self.skip_space();
                // An integer may be printed with its type (`3 : i32`).
                if self.eat(b':') {
                    self.skip_space();
                    self.identifier()?;
                }
                Ok(Value::Int(value))
            }
            Some(b't') if self.text[self.pos..].starts_with(b"true") => {
                self.pos += 4;
                Ok(Value::Int(1))
            }
            Some(b'f') if self.text[self.pos..].starts_with(b"false") => {
                self.pos += 5;
                Ok(Value::Int(0))
            }
            _ => Err(self.unexpected("a value")),
        }
    }

    fn key(&mut self) -> Result<String, String> {
        self.skip_space();
        if self.peek() == Some(b'"') {
            self.string()
        } else {
            self.identifier()
        }
    }

    fn identifier(&mut self) -> Result<String, String> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-' | b'$'))
        {
            self.pos += 1;
        }
        if start == self.pos {
            return Err(self.unexpected("a name"));
        }
        Ok(String::from_utf8_lossy(&self.text[start..self.pos]).into_owned())
    }

    /// A string literal with MLIR's escapes (`\"`, `\\`, `\n`, `\t`, `\XX` hex).
    fn string(&mut self) -> Result<String, String> {
        self.consume(b'"')?;
        let mut bytes = Vec::new();
        loop {
            match self.peek() {
                None => return Err("unterminated string".into()),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(String::from_utf8_lossy(&bytes).into_owned());
                }
                Some(b'\\') => {
                    let escape = self
                        .text
                        .get(self.pos + 1..self.pos + 3)
                        .unwrap_or_default();
                    match escape.first() {
                        Some(b'"') | Some(b'\\') => {
                            bytes.push(escape[0]);
                            self.pos += 2;
                        }
                        Some(b'n') => {
                            bytes.push(b'\n');
                            self.pos += 2;
                        }
                        Some(b't') => {
                            bytes.push(b'\t');
                            self.pos += 2;
                        }
                        _ => {
                            let hex = std::str::from_utf8(escape).unwrap_or_default();
                            let byte = u8::from_str_radix(hex, 16)
                                .map_err(|_| format!("bad escape `\\{hex}`"))?;
                            bytes.push(byte);
                            self.pos += 3;
                        }
                    }
                }
                Some(c) => {
                    bytes.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn consume(&mut self, c: u8) -> Result<(), String> {
        self.skip_space();
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("`{}`", c as char)))
        }
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            self.pos += 1;
        }
    }

    fn unexpected(&self, wanted: &str) -> String {
        let rest = String::from_utf8_lossy(&self.text[self.pos.min(self.text.len())..]);
        format!(
            "expected {wanted} at `{}`",
            rest.chars().take(20).collect::<String>()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_parameter_shape() {
        let targets = parse_target_list(
            r#"[#nvvm.target, #nvvm.target<O = 3, chip = "sm_90", flags = {fast, "ptxas-cmd-options" = ["-v", "--x"]}, link = ["a \22b\22.bc"]>, #rocdl.target<abi = "500", flags = {daz, no_wave64}>]"#,
        )
        .unwrap();
        assert_eq!(targets.len(), 3);
        assert_eq!(
            targets[0],
            TargetAttr {
                name: "nvvm.target".into(),
                params: vec![]
            }
        );
        assert_eq!(targets[1].params[0], ("O".into(), Value::Int(3)));
        assert_eq!(
            targets[1].params[1],
            ("chip".into(), Value::Str("sm_90".into()))
        );
        assert_eq!(
            targets[1].params[2].1,
            Value::Dict(vec![
                ("fast".into(), Value::Unit),
                (
                    "ptxas-cmd-options".into(),
                    Value::Array(vec![Value::Str("-v".into()), Value::Str("--x".into())])
                ),
            ])
        );
        assert_eq!(
            targets[1].params[3].1,
            Value::Array(vec![Value::Str("a \"b\".bc".into())])
        );
        assert_eq!(targets[2].name, "rocdl.target");
    }

    #[test]
    fn malformed_text_is_an_error() {
        assert!(parse_target_list("[#nvvm.target<O = >]").is_err());
        assert!(parse_target_list("[#nvvm.target<chip = \"sm_80>]").is_err());
        assert!(parse_target_list("").is_err());
    }
}
