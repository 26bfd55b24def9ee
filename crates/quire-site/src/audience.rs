//! Pages for signed-in readers, cached by audience, never by person.
//!
//! What a signed-in reader sees depends on their audience, not on who they are:
//! readers see public and private notes, admins drafts too. So `quire-server` asks
//! the site for a signed-in request's audience ([`of_request`]) and keeps the
//! answer under that audience's keys; every reader of an audience is then served
//! the same stored bytes, and a page is rendered once per audience and version
//! instead of once per request.
//!
//! Key decisions:
//! - **The audience comes from the session cookie after every check a signed-in
//!   request gets today** (`auth::viewer`: the signature, the expiry, the sign-out
//!   generation, the users file as it is now), on every request. A signed-out,
//!   expired, forged or removed reader's cookie names no audience: the request
//!   bypasses the cache and is answered as anonymous, never from an audience's
//!   entry. A demoted admin's next request is a reader's.
//! - **An audience's pages hold nothing personal.** A fill for an audience reaches
//!   the site with the audience (a request extension set by `quire-server`) and no
//!   cookie, and renders for [`Viewer::of_audience`]: a role, no name. The reader's
//!   name is on `/account`, which is never cached ([`PERSONAL_PATHS`]); the view
//!   counts admins saw on note pages are on `/_views` (a count in a cached page would
//!   be stale). Templates a vault overrides get `reader.name` empty on cached pages.
//! - **Browsers get `Cache-Control: private, no-cache`; quire gets the lifetime in
//!   `Surrogate-Control`**, a field targeted at quire that it never sends on (stored
//!   heads and answers drop it). So no cache in front of quire, and no browser cache
//!   shared by two people, keeps a member's page, while quire does.
//! - **Each audience's pages have versions of their own**, made as the anonymous
//!   ones are, from that audience's renders, listings, related notes and graphs
//!   ([`crate::snapshot::Snapshot::compute_signed_in`]), each with an epoch of its
//!   own so no version (and `ETag`) is ever shared with another audience. An edit
//!   changes exactly the versions of the pages that show it, per audience. They are
//!   made in the background the first time a signed-in reader asks, then with
//!   every reload; until they exist, signed-in requests bypass the cache as before.

use http::HeaderMap;
use quire_http::key::NormalizedUrl;
use quire_server::upstream::Audience;
use quire_vault::readers::{Sessions, Users};
use quire_vault::Visibility;
use std::sync::LazyLock;

use crate::model::Viewer;

/// Signed-in readers: public and private notes.
pub static READER: LazyLock<Audience> = LazyLock::new(|| Audience::new("reader", &["private"]));

/// Admins: drafts too.
pub static ADMIN: LazyLock<Audience> =
    LazyLock::new(|| Audience::new("admin", &["draft", "private"]));

/// Paths whose answer is personal: never served from an audience's entries.
pub const PERSONAL_PATHS: &[&str] = &["/account"];

/// The audience of what `aud` may see (none for public: that is the anonymous cache).
pub fn of_visibility(aud: Visibility) -> Option<Audience> {
    match aud {
        Visibility::Public => None,
        Visibility::Private => Some(*READER),
        Visibility::Draft => Some(*ADMIN),
    }
}

/// What members of `a` may see, if it is one of the site's audiences.
pub fn visibility(a: Audience) -> Option<Visibility> {
    if a == *READER {
        Some(Visibility::Private)
    } else if a == *ADMIN {
        Some(Visibility::Draft)
    } else {
        None
    }
}

/// The audience a request to `url` is answered as: its session's, when the cookie
/// names a valid session now and the path is not personal.
pub fn of_request(
    url: &NormalizedUrl,
    headers: &HeaderMap,
    sessions: &Sessions,
    users: &Users,
) -> Option<Audience> {
    if PERSONAL_PATHS.contains(&url.path()) {
        return None;
    }
    // The checks of `auth::viewer`, without copying the reader (this runs on
    // every signed-in hit).
    let cookie = crate::auth::cookie(headers)?;
    let role = sessions.verify_role(cookie, users, std::time::SystemTime::now())?;
    of_visibility(role.audience())
}

impl Viewer {
    /// The reader every member of the audience `aud` is rendered as: a role, no
    /// name.
    pub fn of_audience(aud: Visibility) -> Viewer {
        Viewer {
            name: String::new(),
            role: match aud {
                Visibility::Draft => "admin",
                _ => "reader",
            },
            audience: aud,
            shared: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_audience_maps_back_to_what_it_sees() {
        for aud in [Visibility::Private, Visibility::Draft] {
            let a = of_visibility(aud).expect("signed-in audiences have one");
            assert_eq!(visibility(a), Some(aud));
        }
        assert_eq!(of_visibility(Visibility::Public), None);
        assert_ne!(*READER, *ADMIN);
        assert_eq!(visibility(Audience::new("reader", &["other"])), None);
    }
}
