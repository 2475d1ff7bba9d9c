//! Text from a server, made safe to print on a terminal.
//!
//! A status message, an error, a tool's text or a field of the admin API is whatever the
//! server sent. Printed as it is, an escape sequence in it would act on the user's terminal:
//! retitle the window (`ESC ] 0 ; title BEL`), clear the screen (`ESC [ 2 J`), move the
//! cursor to overwrite what was printed before, or worse on some terminals. So every string
//! a server sent goes through [`printable`] before it is printed. JSON output (`--json`,
//! `--raw`) goes through [`json`]: the server's strings whole, with every control character
//! escaped (serde_json escapes the ASCII ones only, not DEL nor the 8-bit CSI `\u{9b}`).

use std::borrow::Cow;

/// `text` without escape sequences and control characters (newline and tab kept).
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' | '\t' => out.push(c),
            '\x1b' => match chars.next() {
                // CSI: parameters and intermediates up to a final byte `@`..`~`.
                Some('[') => skip_csi(&mut chars),
                // OSC, DCS, SOS, PM, APC: a string up to BEL or ST.
                Some(']' | 'P' | 'X' | '^' | '_') => skip_string(&mut chars),
                // Any other escape: intermediates (` `..`/`), then one final character.
                Some(' '..='/') => {
                    while chars.next_if(|c| matches!(c, ' '..='/')).is_some() {}
                    chars.next();
                }
                Some(_) | None => {}
            },
            // The 8-bit forms of CSI and of the string controls.
            '\u{9b}' => skip_csi(&mut chars),
            '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            // The other controls: the ASCII ones, DEL and the 8-bit ones (Unicode's Cc).
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `value` as JSON (`pretty`: indented), safe to print: DEL and the 8-bit controls, which
/// JSON lets through, escaped as `\u007f`..`\u009f` (outside strings JSON has none).
pub fn json(value: &impl serde::Serialize, pretty: bool) -> String {
    let text = if pretty {
        serde_json::to_string_pretty(value)
    } else {
        serde_json::to_string(value)
    };
    let text = text.unwrap_or_default();
    // serde_json escapes the ASCII controls in strings; outside them are only spaces and
    // the newlines of `pretty`.
    let unescaped = |c: char| matches!(c, '\x7f'..='\u{9f}');
    if !text.chars().any(unescaped) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 5);
    for c in text.chars() {
        if unescaped(c) {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    chars.find(|c| matches!(c, '@'..='~'));
}

/// Up to BEL, ESC `\` or the 8-bit ST, inclusive.
fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    if chars.find(|c| matches!(c, '\x07' | '\u{9c}' | '\x1b')) == Some('\x1b') {
        chars.next_if_eq(&'\\');
    }
}

#[cfg(test)]
mod tests {
    use super::{json, printable};

    #[test]
    fn json_escapes_every_control_and_reads_back_the_same() {
        let sent = serde_json::json!({ "text": "c1\u{9b}2J del\x7f esc\x1b nl\n caf\u{e9}" });
        for pretty in [false, true] {
            let printed = json(&sent, pretty);
            assert!(
                !printed.chars().any(|c| c > '\x7e' && c < '\u{a0}'),
                "{printed}"
            );
            assert!(
                printed.contains("\\u009b") && printed.contains("\\u007f"),
                "{printed}"
            );
            let read: serde_json::Value = serde_json::from_str(&printed).unwrap();
            assert_eq!(read, sent);
        }
    }

    #[test]
    fn escape_sequences_and_controls_are_removed() {
        for (sent, shown) in [
            ("\x1b]0;pwned\x07", ""),
            ("\x1b[2J", ""),
            ("a\x1b]0;pwned\x07b\x1b[2Jc", "abc"),
            ("title\x1b]2;x\x1b\\ end", "title end"),
            ("\x1b[1;31mred\x1b[0m", "red"),
            ("\x1bcreset", "reset"),
            ("\x1b(Bascii", "ascii"),
            ("over\rwrite\x08\x7f", "overwrite"),
            ("c1\u{9b}2Jcsi\u{9d}0;t\u{9c}osc\u{85}", "c1csiosc"),
            ("bell\x07\0", "bell"),
            ("cut at the end \x1b", "cut at the end "),
            ("cut in a string \x1b]0;no end", "cut in a string "),
        ] {
            assert_eq!(printable(sent), shown, "{sent:?}");
        }
    }

    #[test]
    fn ordinary_text_is_kept_as_it_is() {
        let text = "line 1\n\tline 2: caf\u{e9} \u{2713} [50%]";
        assert!(matches!(printable(text), std::borrow::Cow::Borrowed(t) if t == text));
    }
}
