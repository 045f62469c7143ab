//! What the model said (a `model_output` event) as the engine reads it: its kind, the digest of
//! its normalised text (or of the caller's own digest), whether a stop hook is keeping its turn
//! going, and whether the text is one short piece repeated over and over. The detectors of loops
//! without tool calls judge what output_memory.rs remembers of these; the text is never kept.

/// Per piece (by its rolling hash): where its latest counted copy starts and how many follow one
/// another. An open-addressed table sized for every position, so a lookup is a multiply and a
/// short probe (a general map's hashing was most of the analysis' time).
struct Chains {
    slots: Vec<(u64, usize, u32)>, // (hash, start, count); count 0: empty
    mask: usize,
}

impl Chains {
    fn new(positions: usize) -> Chains {
        let size = (positions * 2).next_power_of_two().max(16);
        Chains { slots: vec![(0, 0, 0); size], mask: size - 1 }
    }
    fn slot(&mut self, hash: u64) -> &mut (u64, usize, u32) {
        // The polynomial hash's low bits are weak: spread them before taking a slot.
        let mut at = ((hash ^ (hash >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9) >> 32) as usize & self.mask;
        while self.slots[at].2 != 0 && self.slots[at].0 != hash {
            at = (at + 1) & self.mask;
        }
        &mut self.slots[at]
    }
}

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
        if word.is_ascii() {
            out.extend(word.bytes().map(|b| b.to_ascii_lowercase() as char));
        } else {
            out.extend(word.chars().flat_map(char::to_lowercase));
        }
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

/// How far apart two counted copies of a piece may start, in pieces. Gemini CLI counts copies
/// within 1.5 pieces; the real thought loops of the vendored traces repeat a unit of 140 to a few
/// hundred characters (1,421 and 902 copies of one piece), which that spacing counts once, while no
/// good output holds more than 5 copies of a piece within 6 pieces of each other outside code
/// (bench/results/2026-12-06-no-tool-thresholds.md).
pub const SPACING_PIECES: usize = 6;

/// The most copies of one `chunk`-character piece of `normalised`, outside closed fenced code
/// blocks, that follow one another, each starting at least `chunk` and at most SPACING_PIECES x
/// `chunk` characters after the previous one; 0 or 1 when nothing repeats. A closed code block is a
/// listing the model finished (a `sed` script over 33 line numbers repeats its pieces as much as a
/// loop does); an unclosed one is kept, since a generation loop can run inside it to the end.
/// Over the last ANALYSED_CHARS characters only, in time linear in them (a rolling hash, each
/// match confirmed on the characters themselves).
pub fn chunk_copies(normalised: &str, chunk: usize) -> u32 {
    if chunk == 0 {
        return 0;
    }
    // The tail only: its start found from the end, so a long text is not turned into chars whole.
    let prose = outside_closed_fences(normalised);
    let start = prose.char_indices().rev().nth(ANALYSED_CHARS - 1).map_or(0, |(at, _)| at);
    let chars: Vec<char> = prose[start..].chars().collect();
    if chars.len() < 2 * chunk {
        return 0;
    }
    const BASE: u64 = 0x100_0000_01B3;
    let top = (1..chunk).fold(1u64, |p, _| p.wrapping_mul(BASE)); // BASE^(chunk - 1)
    let mut hash = chars[..chunk].iter().fold(0u64, |h, &c| h.wrapping_mul(BASE).wrapping_add(c as u64));
    let far = chunk * SPACING_PIECES;
    let positions = chars.len() - chunk + 1;
    let mut chains = Chains::new(positions);
    let mut most = 0;
    for at in 0..positions {
        if at > 0 {
            let gone = chars[at - 1] as u64;
            let came = chars[at + chunk - 1] as u64;
            hash = hash.wrapping_sub(gone.wrapping_mul(top)).wrapping_mul(BASE).wrapping_add(came);
        }
        let chain = chains.slot(hash);
        let (_, last, count) = *chain;
        if count == 0 {
            *chain = (hash, at, 1);
        } else if at - last < chunk {
            continue; // overlaps the copy counted last
        } else if at - last <= far && chars[at..at + chunk] == chars[last..last + chunk] {
            *chain = (hash, at, count + 1);
        } else {
            *chain = (hash, at, 1);
        }
        most = most.max(chain.2);
    }
    most
}

/// The text with every closed ``` fenced block taken out (its fences too); the text after an
/// unclosed fence stays. Borrowed when there is no fence.
fn outside_closed_fences(text: &str) -> std::borrow::Cow<'_, str> {
    const FENCE: &str = "```";
    if !text.contains(FENCE) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find(FENCE) {
        let after = &rest[open + FENCE.len()..];
        match after.find(FENCE) {
            Some(close) => {
                out.push_str(&rest[..open]);
                rest = &after[close + FENCE.len()..];
            }
            None => break,
        }
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
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
        // A 60-character unit: copies 60 apart.
        let sixty = format!("{piece}0123456789");
        assert_eq!(chunk_copies(&sixty.repeat(10), 50), 10);
        // A 140-character unit, the shape of the traces' real thought loops: copies 140 apart,
        // within SPACING_PIECES pieces of each other.
        let unit = format!("{piece} wait, i want to add preserve_dtypes to set_output; no change (again) ");
        assert_eq!(chunk_copies(&unit.repeat(12), 50), 12);
    }

    #[test]
    fn closed_code_blocks_are_left_out_and_an_unclosed_one_is_read() {
        let piece = "sed -i '700s/old/new/' sympy/printing/mathml.py &&";
        assert_eq!(piece.chars().count(), 50);
        let listing = format!("the edits: ```bash {} ``` done.", piece.repeat(33));
        assert!(chunk_copies(&listing, 50) <= 1, "{}", chunk_copies(&listing, 50));
        let unclosed = format!("the edits: ```bash {}", piece.repeat(33));
        assert_eq!(chunk_copies(&unclosed, 50), 33);
        assert_eq!(outside_closed_fences("a ```x``` b ```y``` c ```z"), "a  b  c ```z");
    }

    #[test]
    fn text_that_does_not_repeat_tightly_is_not_a_chunk_loop() {
        let prose: String = (0..400).map(|i| format!("word{i} ")).collect();
        assert!(chunk_copies(&prose, 50) <= 1);
        // A piece seen again only after more than SPACING_PIECES pieces of other text.
        let piece = "0123456789abcdefghij0123456789abcdefghij0123456789";
        let filler: String = (0..100).map(|i| format!("w{i:02} ")).collect(); // 400 characters
        let spaced: String = (0..12).map(|_| format!("{piece}{filler}")).collect();
        assert!(chunk_copies(&spaced, 50) <= 1, "{}", chunk_copies(&spaced, 50));
        assert_eq!(chunk_copies("short", 50), 0);
    }
}
