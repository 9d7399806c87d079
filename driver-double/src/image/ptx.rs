//! PTX as the CUDA driver's JIT reads it: `.version`, `.target`, and each `.entry`'s parameter
//! list (PTX ISA, "Kernel Function Parameters": each parameter at its alignment after the last),
//! its performance directives and the `.shared` memory its body declares or names.

use super::{Image, Kernel, Kind, Param};

/// Bytes of a PTX fundamental type (`.u64`, `.f32`, `.b8`, `.pred`).
fn type_size(token: &str) -> Option<usize> {
    let bits: usize = match token {
        ".pred" => return Some(1),
        _ => token.get(2..)?.parse().ok()?,
    };
    matches!(token.as_bytes().get(1), Some(b'u' | b's' | b'b' | b'f')).then_some(bits / 8)
}

fn parse_param(text: &str, after: usize) -> Result<Param, String> {
    let mut align = None;
    let mut size = None;
    let mut pointer = false;
    let mut count = 1;
    let mut tokens = text.split_whitespace().peekable();
    while let Some(token) = tokens.next() {
        match token {
            ".param" => {}
            ".ptr" => pointer = true,
            ".align" => align = tokens.next().and_then(|a| a.parse::<usize>().ok()),
            ".global" | ".const" | ".local" | ".shared" => {}
            t if t.starts_with('.') => size = type_size(t),
            name => {
                if let Some((_, rest)) = name.split_once('[') {
                    count = rest.trim_end_matches(']').parse().map_err(|_| {
                        format!("parameter `{text}`: an array length that is not a number")
                    })?;
                }
            }
        }
    }
    let size = size.ok_or_else(|| format!("parameter `{text}` has no type"))? * count;
    // A pointer's `.align` is its pointee's; the parameter itself is an 8-byte value.
    let align = if pointer { size } else { align.unwrap_or(size) }.max(1);
    Ok(Param {
        offset: after.div_ceil(align) * align,
        size,
        pointer,
    })
}

/// The three numbers of `.maxntid 256, 1, 1`.
fn triple(text: &str) -> [u32; 3] {
    let mut values = text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter_map(|v| v.parse().ok());
    [
        values.next().unwrap_or(1),
        values.next().unwrap_or(1),
        values.next().unwrap_or(1),
    ]
}

/// `.shared .align 4 .b8 name[1024];` → (name, bytes).
fn shared_declaration(line: &str) -> Option<(String, u64)> {
    let rest = line.trim().strip_prefix(".shared")?;
    let mut element = 1;
    let mut name = None;
    let mut tokens = rest.split_whitespace();
    while let Some(token) = tokens.next() {
        match token {
            ".align" => {
                tokens.next();
            }
            t if t.starts_with('.') => element = type_size(t).unwrap_or(1),
            t => name = Some(t.trim_end_matches(';')),
        }
    }
    let name = name?;
    let (name, count) = match name.split_once('[') {
        Some((name, count)) => (
            name,
            count.trim_end_matches(']').parse::<u64>().unwrap_or(0),
        ),
        None => (name, 1),
    };
    Some((name.to_string(), element as u64 * count))
}

pub fn read(text: &str) -> Result<Image, String> {
    let directive = |name: &str| {
        text.lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    let version = directive(".version").ok_or("PTX without a .version directive")?;
    let version = version
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        .ok_or_else(|| format!("PTX .version `{version}` is not MAJOR.MINOR"))?;
    let target = directive(".target").ok_or("PTX without a .target directive")?;
    let target = target.split(',').next().unwrap_or_default().trim();
    let sm = super::sm_of(target).ok_or_else(|| format!("PTX .target `{target}` is not sm_XY"))?;
    // Module-scope `.shared` variables count for the kernels whose body names them.
    let mut module_shared = Vec::new();
    let mut depth = 0usize;
    for line in text.lines() {
        if depth == 0 {
            if let Some(declared) = shared_declaration(line) {
                module_shared.push(declared);
            }
        }
        depth = (depth + line.matches('{').count()).saturating_sub(line.matches('}').count());
    }
    let mut kernels = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(".entry ") {
        rest = &rest[at + ".entry ".len()..];
        let open = rest.find('(').ok_or("an .entry without a parameter list")?;
        let name = rest[..open].trim().to_string();
        let close = rest
            .find(')')
            .ok_or("an .entry whose parameter list does not end")?;
        let mut params: Vec<Param> = Vec::new();
        for text in rest[open + 1..close]
            .split(',')
            .filter(|p| !p.trim().is_empty())
        {
            let after = params.last().map_or(0, |p| p.offset + p.size);
            params.push(parse_param(text, after).map_err(|e| format!("kernel `{name}`: {e}"))?);
        }
        let body_start = rest.find('{').ok_or("an .entry without a body")?;
        let directives = &rest[close + 1..body_start];
        let mut body_end = body_start;
        let mut depth = 0;
        for (i, c) in rest[body_start..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        body_end = body_start + i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let body = &rest[body_start..body_end];
        let mut static_shared: u64 = body
            .lines()
            .filter_map(shared_declaration)
            .map(|(_, b)| b)
            .sum();
        static_shared += module_shared
            .iter()
            .filter(|(name, _)| body.contains(name.as_str()))
            .map(|(_, bytes)| bytes)
            .sum::<u64>();
        let find = |name: &str| {
            directives
                .lines()
                .map(str::trim)
                .find_map(|l| l.strip_prefix(name))
                .map(triple)
        };
        let required_block = find(".reqntid");
        let max_threads = required_block
            .or(find(".maxntid"))
            .map_or(1024, |[x, y, z]| x * y * z);
        let registers: u32 = body
            .lines()
            .filter_map(|l| l.trim().strip_prefix(".reg "))
            .filter_map(|l| {
                let (kind, count) = l.split_once('<')?;
                let count: u32 = count.split('>').next()?.parse().ok()?;
                let bytes = type_size(kind.split_whitespace().next()?).unwrap_or(4) as u32;
                Some(count * bytes.div_ceil(4))
            })
            .sum();
        let local_bytes = body
            .lines()
            .filter(|l| l.trim().starts_with(".local"))
            .filter_map(|l| shared_declaration(&l.trim().replacen(".local", ".shared", 1)))
            .map(|(_, b)| b)
            .sum();
        kernels.push(Kernel {
            param_bytes: params.last().map_or(0, |p| p.offset + p.size),
            name,
            params,
            static_shared,
            max_threads,
            required_block,
            registers: registers.clamp(1, 255),
            local_bytes,
        });
        rest = &rest[body_end..];
    }
    Ok(Image {
        kind: Kind::Ptx { version, sm },
        kernels,
    })
}
