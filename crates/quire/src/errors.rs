//! How the binary reports an error: its chain of causes on one line.

/// `e` and its causes joined with `: `, leaving out a cause its outer message already
/// says: the library errors put their source in their own message (`preallocating
/// VOL: No space left on device`), so anyhow's `{:#}` printed it once per level.
pub(crate) fn error_chain(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !out.contains(&c) {
            out.push_str(": ");
            out.push_str(&c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_in_the_message_is_said_once() {
        let io = std::io::Error::other("No space left on device");
        let inner = quire_store::StoreError::Io {
            context: "preallocating v.vol".into(),
            source: io,
        };
        let e = anyhow::Error::new(inner).context("cache volume v.vol");
        let text = error_chain(&e);
        assert_eq!(
            text,
            "cache volume v.vol: preallocating v.vol: No space left on device"
        );
        // A cause the message does not say is kept.
        let e = anyhow::anyhow!("outer").context("top");
        assert_eq!(error_chain(&e), "top: outer");
    }
}
