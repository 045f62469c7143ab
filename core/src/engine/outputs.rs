//! What the model said (a `model_output` event) as the engine reads it: its kind, the digest of
//! its normalised text (or of the caller's own digest), whether a stop hook is keeping its turn
//! going, and whether the text is one short piece repeated over and over. The detectors of loops
//! without tool calls judge what output_memory.rs remembers of these; the text is never kept.

use std::collections::HashMap;

/// What a model output is: each kind is its own stream of repeats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputKind {
    Message = 0,
    Thought = 1,
    FinalAnswer = 2,
}

impl OutputKind {
    pub const ALL: [OutputKind; 3] = [OutputKind::Message, OutputKind::Thought, OutputKind::FinalAnswer];

    /// ModelOutput.output_kind's wire value (unspecified or unknown: a message).
    pub fn from_wire(value: i32) -> OutputKind {
        match value {
            2 => OutputKind::Thought,
            3 => OutputKind::FinalAnswer,
            _ => OutputKind::Message,
        }
    }

    /// As the event format spells it (warning keys).
    pub fn name(self) -> &'static str {
        match self {
            OutputKind::Message => "message",
            OutputKind::Thought => "thought",
            OutputKind::FinalAnswer => "final_answer",
        }
    }

    /// As a message to the model names it.
    pub fn phrase(self) -> &'static str {
        match self {
            OutputKind::Message => "message",
            OutputKind::Thought => "thought",
            OutputKind::FinalAnswer => "final answer",
        }
    }
}

/// One model output as the engine sees it.
#[derive(Clone, Copy, Debug)]
pub struct Output<'a> {
    /// The text as sent ("" when the caller sent only its digest).
    pub text: &'a str,
    /// The caller's own digest of the normalised text, used when there is no text.
    pub text_digest: &'a str,
    pub kind: OutputKind,
    /// A stop hook already kept this turn going (Claude Code's `stop_hook_active`).
    pub stop_hook_active: bool,
    pub seq: u64,
}

/// The text as outputs are compared: trimmed, every run of whitespace one space, lower-cased.
pub fn normalise(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(word.chars().flat_map(char::to_lowercase));
    }
    out
}

/// The output's identity: XXH3-64 of its normalised text, or of the caller's digest (each in its
/// own namespace, so a text never equals a digest by accident).
pub fn digest(output: &Output, normalised: &str) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    if output.text.is_empty() {
        h.update(b"d");
        h.update(output.text_digest.as_bytes());
    } else {
        h.update(b"t");
        h.update(normalised.as_bytes());
    }
    h.digest()
}

/// How much of a long text the chunk analysis reads: its last characters, where a generation
/// loop that ran to the end of the output is.
pub const ANALYSED_CHARS: usize = 65_536;

/// The most copies of one `chunk`-character piece of `normalised` that follow one another, each
/// starting at least `chunk` and at most 1.5 x `chunk` characters after the previous one (a
/// tight repetition, as gemini-cli's loop detection counts one); 0 or 1 when nothing repeats.
/// Over the last ANALYSED_CHARS characters only, in time linear in them (a rolling hash, each
/// match confirmed on the characters themselves).
pub fn chunk_copies(normalised: &str, chunk: usize) -> u32 {
    if chunk == 0 {
        return 0;
    }
    let all: Vec<char> = normalised.chars().collect();
    let chars = &all[all.len().saturating_sub(ANALYSED_CHARS)..];
    if chars.len() < 2 * chunk {
        return 0;
    }
    const BASE: u64 = 0x100_0000_01B3;
    let top = (1..chunk).fold(1u64, |p, _| p.wrapping_mul(BASE)); // BASE^(chunk - 1)
    let mut hash = chars[..chunk].iter().fold(0u64, |h, &c| h.wrapping_mul(BASE).wrapping_add(c as u64));
    let far = chunk + chunk / 2;
    // Per piece (by hash): where its latest counted copy starts and how many follow one another.
    let mut chains: HashMap<u64, (usize, u32)> = HashMap::new();
    let mut most = 0;
    for at in 0..=chars.len() - chunk {
        if at > 0 {
            let gone = chars[at - 1] as u64;
            let came = chars[at + chunk - 1] as u64;
            hash = hash.wrapping_sub(gone.wrapping_mul(top)).wrapping_mul(BASE).wrapping_add(came);
        }
        let chain = chains.entry(hash).or_insert((at, 0));
        let (last, count) = *chain;
        if count == 0 {
            *chain = (at, 1);
        } else if at - last < chunk {
            continue; // overlaps the copy counted last
        } else if at - last <= far && chars[at..at + chunk] == chars[last..last + chunk] {
            *chain = (at, count + 1);
        } else {
            *chain = (at, 1);
        }
        most = most.max(chain.1);
    }
    most
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalising_trims_collapses_whitespace_and_lowers_case() {
        assert_eq!(normalise("  Hello,\n\tWORLD  again "), "hello, world again");
        assert_eq!(normalise("ÉCOLE  Straße"), "école straße");
        assert_eq!(normalise(" \n "), "");
    }

    #[test]
    fn a_text_and_a_digest_never_share_an_identity() {
        let text = Output { text: "abc", text_digest: "", kind: OutputKind::Message, stop_hook_active: false, seq: 1 };
        let digest_only = Output { text: "", text_digest: "abc", ..text };
        assert_ne!(digest(&text, "abc"), digest(&digest_only, ""));
        assert_eq!(digest(&text, &normalise(" ABC ")), digest(&text, "abc"));
    }

    #[test]
    fn a_piece_repeated_back_to_back_is_counted_once_per_copy() {
        let piece = "the same fifty characters of text, again and again";
        assert_eq!(piece.chars().count(), 50);
        assert_eq!(chunk_copies(&piece.repeat(10), 50), 10);
        assert_eq!(chunk_copies(&format!("a preamble. {}", piece.repeat(12)), 50), 12);
        // A shorter unit repeats its 50-character windows every 50 characters too.
        assert_eq!(chunk_copies(&"ab".repeat(500), 50), 20);
        // A 60-character unit: copies 60 apart, within 1.5 x 50.
        let sixty = format!("{piece}0123456789");
        assert_eq!(chunk_copies(&sixty.repeat(10), 50), 10);
    }

    #[test]
    fn text_that_does_not_repeat_tightly_is_not_a_chunk_loop() {
        let prose: String = (0..400).map(|i| format!("word{i} ")).collect();
        assert!(chunk_copies(&prose, 50) <= 1);
        // An 80-character unit: copies 80 apart, farther than 1.5 x 50.
        let eighty = "0123456789abcdefghij".repeat(4);
        let spaced: String = (0..12).map(|i| format!("{eighty}{i:03}")).collect::<Vec<_>>().join("");
        assert!(chunk_copies(&spaced, 50) <= 1, "{}", chunk_copies(&spaced, 50));
        assert_eq!(chunk_copies("short", 50), 0);
    }
}
