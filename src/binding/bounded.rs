//! Bounds on the text the controllers write, whatever a tenant writes into the objects
//! it is built from (a selector of 500 expressions, a long class name, an API server's
//! long refusal). Every condition message passes [`condition_message`] and every event
//! note [`event_note`]; each cuts at a character boundary and says how much it cut, so
//! a reader knows the text goes on. Lists a tenant sizes are bounded where they are
//! rendered ([`listed`]: "… and 480 more requirements"), so the text reads whole in
//! every case but a pathological one (docs/binding.md, "Why a claim waits").

use std::borrow::Cow;

/// The longest `note` an events.k8s.io/v1 Event may have, in bytes: kube-apiserver
/// refuses a longer one (422).
pub const EVENT_NOTE_MAX: usize = 1024;

/// The longest `message` a metav1 Condition may have (its schema's maxLength).
pub const CONDITION_MESSAGE_MAX: usize = 32 * 1024;

/// The most bytes a rendered list (a selector's requirements) takes before it says how
/// many more there are.
pub const LIST_MAX: usize = 256;

/// `text` as a condition message: at most [`CONDITION_MESSAGE_MAX`] bytes.
pub fn condition_message(text: &str) -> Cow<'_, str> {
    cut(text, CONDITION_MESSAGE_MAX)
}

/// `text` as an event note: at most [`EVENT_NOTE_MAX`] bytes.
pub fn event_note(text: &str) -> Cow<'_, str> {
    cut(text, EVENT_NOTE_MAX)
}

/// `text` if it fits in `max` bytes; else its longest prefix that, followed by
/// "… (N more characters)", fits, cut at a character boundary (a `max` too small for
/// that count: the prefix and "…").
pub fn cut(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    // The suffix is longest when it counts every character of `text`.
    let longest = more_characters(text.chars().count()).len();
    if max < longest {
        let end = char_floor(text, max.saturating_sub(ELLIPSIS.len()));
        let ellipsis = if max >= ELLIPSIS.len() { ELLIPSIS } else { "" };
        return Cow::Owned(format!("{}{ellipsis}", &text[..end]));
    }
    let end = char_floor(text, max - longest);
    let rest = text[end..].chars().count();
    Cow::Owned(format!("{}{}", &text[..end], more_characters(rest)))
}

const ELLIPSIS: &str = "…";

/// The largest character boundary of `text` at or before `at`.
fn char_floor(text: &str, at: usize) -> usize {
    let mut end = at.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    end
}

fn more_characters(n: usize) -> String {
    format!("… ({n} more characters)")
}

/// `items` joined by `separator` while they fit in `max` bytes, then " and N more
/// {plural}" for the rest (`singular` for one). The first item is always named, cut
/// short if it alone does not fit. Items past the bound are counted, not rendered.
pub fn listed<I>(items: I, separator: &str, max: usize, singular: &str, plural: &str) -> String
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    let mut out = String::new();
    let mut more = 0usize;
    for item in items {
        let item = item.as_ref();
        if more > 0 {
            more += 1;
        } else if out.is_empty() {
            out.push_str(&cut(item, max));
        } else if out.len() + separator.len() + item.len() <= max {
            out.push_str(separator);
            out.push_str(item);
        } else {
            more = 1;
        }
    }
    match more {
        0 => out,
        1 => format!("{out} and 1 more {singular}"),
        n => format!("{out} and {n} more {plural}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_that_fits_is_kept_as_it_is() {
        let text = "x".repeat(EVENT_NOTE_MAX);
        assert!(matches!(event_note(&text), Cow::Borrowed(t) if t == text));
        assert!(matches!(condition_message(""), Cow::Borrowed("")));
    }

    #[test]
    fn a_long_note_is_cut_to_the_limit_and_says_how_much_was_cut() {
        let text = "y".repeat(26_566);
        let note = event_note(&text);
        assert!(note.len() <= EVENT_NOTE_MAX, "{}", note.len());
        let kept = note.find('…').expect("an ellipsis");
        let said: usize = note[kept..]
            .trim_start_matches("… (")
            .trim_end_matches(" more characters)")
            .parse()
            .expect("a count");
        assert_eq!(kept + said, text.len(), "kept and cut add up to the text");
        assert!(note.len() > EVENT_NOTE_MAX - 30, "it uses the room it has");
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        for width in [1, 2, 3, 4] {
            let ch = ['a', 'é', '€', '🦀'][width - 1];
            let text: String = std::iter::repeat_n(ch, 2000).collect();
            for max in 0..30 {
                assert!(
                    cut(&text, max).len() <= max,
                    "{width}-byte chars, max {max}"
                );
            }
            for max in 30..60 {
                let out = cut(&text, max);
                assert!(
                    out.len() <= max,
                    "{width}-byte chars, max {max}: {}",
                    out.len()
                );
                let (kept, _) = out.split_once('…').expect("cut");
                let rest: usize = out[kept.len()..]
                    .trim_start_matches("… (")
                    .trim_end_matches(" more characters)")
                    .parse()
                    .expect("a count");
                assert_eq!(kept.chars().count() + rest, 2000);
            }
        }
    }

    #[test]
    fn a_condition_message_keeps_under_its_limit() {
        let text = "z".repeat(100_000);
        let message = condition_message(&text);
        assert!(message.len() <= CONDITION_MESSAGE_MAX);
        assert!(message.ends_with(" more characters)"));
    }

    #[test]
    fn a_list_names_what_fits_and_counts_the_rest() {
        let items: Vec<String> = (0..500).map(|i| format!("key{i:03} in (a,b)")).collect();
        let out = listed(&items, ",", LIST_MAX, "requirement", "requirements");
        let (named, more) = out.split_once(" and ").expect("a count");
        assert!(named.len() <= LIST_MAX);
        let named_count = named.split(',').filter(|p| p.starts_with("key")).count();
        assert_eq!(more, format!("{} more requirements", 500 - named_count));
        assert!(named.starts_with("key000 in (a,b),key001 in (a,b)"));
    }

    #[test]
    fn a_short_list_is_whole_and_one_more_is_singular() {
        assert_eq!(listed(["a", "b"], ",", 10, "x", "xs"), "a,b");
        assert_eq!(
            listed(["aaaa", "bbbb", "c"], ",", 9, "x", "xs"),
            "aaaa,bbbb and 1 more x"
        );
        assert_eq!(listed(Vec::<String>::new(), ",", 9, "x", "xs"), "");
    }

    #[test]
    fn a_first_item_too_long_for_the_list_is_cut() {
        let long = "k".repeat(1000);
        let out = listed([long.as_str(), "b"], ",", 100, "x", "xs");
        assert!(out.ends_with(" and 1 more x"), "{out}");
        assert!(out.len() <= 100 + " and 1 more x".len());
    }
}
