//! Tool-name normalisation (spec section 3), as tests/reference/engine/toolnames.py does it: NFKC,
//! format characters (category Cf) dropped, trimmed, lower-cased, aliases folded, empty -> "tool".

use unicode_normalization::UnicodeNormalization;

use crate::json::py_isspace;

/// Unicode 14 (Python 3.11's unicodedata) general category Cf.
fn is_format_char(c: char) -> bool {
    matches!(c as u32,
        0x00AD | 0x0600..=0x0605 | 0x061C | 0x06DD | 0x070F | 0x0890..=0x0891 | 0x08E2 | 0x180E
        | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F | 0xFEFF
        | 0xFFF9..=0xFFFB | 0x110BD | 0x110CD | 0x13430..=0x13438 | 0x1BCA0..=0x1BCA3
        | 0x1D173..=0x1D17A | 0xE0001 | 0xE0020..=0xE007F)
}

pub fn normalize_tool_name(raw: &str) -> String {
    let folded: String;
    let mut name: &str = raw;
    if !raw.is_ascii() {
        folded = raw.nfkc().filter(|c| !is_format_char(*c)).collect();
        name = &folded;
    }
    let trimmed = name.trim_matches(py_isspace);
    let lowered = if trimmed.is_ascii() { trimmed.to_ascii_lowercase() } else { trimmed.to_lowercase() };
    match lowered.as_str() {
        "" => "tool".to_string(),
        "bash" => "exec".to_string(),
        "apply-patch" => "apply_patch".to_string(),
        _ => lowered,
    }
}

#[cfg(test)]
mod tests {
    use super::normalize_tool_name;

    #[test]
    fn documented_rules() {
        assert_eq!(normalize_tool_name("  Bash "), "exec");
        assert_eq!(normalize_tool_name("apply-patch"), "apply_patch");
        assert_eq!(normalize_tool_name(" "), "tool");
        assert_eq!(normalize_tool_name("ｒｅａｄ"), "read");
        assert_eq!(normalize_tool_name("re\u{200b}ad"), "read");
    }
}
