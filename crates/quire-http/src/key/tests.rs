//! Tests of `key`.

use super::*;
use http::header::HeaderName;
use proptest::prelude::*;

fn norm(scheme: &str, host: Option<&str>, target: &str) -> Result<NormalizedUrl, KeyError> {
    let uri: Uri = target.parse().unwrap();
    let host = host.map(|h| HeaderValue::from_str(h).unwrap());
    normalize(scheme, host.as_ref(), &uri, &KeyConfig::default())
}

fn url(target: &str) -> String {
    norm("http", Some("example.com"), target)
        .unwrap()
        .to_string()
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_bytes(v.as_bytes()).unwrap(),
        );
    }
    h
}

fn vary(v: &[&str]) -> VaryFields {
    VaryFields::parse(v.iter().map(|s| s.as_bytes()))
}

/// RFC 3986 §6.2.2.1: scheme and host are case-insensitive.
#[test]
fn scheme_and_host_are_lower_cased() {
    let u = norm("HTTPS", Some("WWW.Example.COM"), "/A").unwrap();
    assert_eq!(u.as_str(), "https://www.example.com/A");
    assert_eq!(u.scheme(), "https");
    assert_eq!(u.host(), "www.example.com");
}

/// RFC 3986 §6.2.3: the scheme's default port is dropped, others kept; an empty
/// port is none; leading zeros are one number.
#[test]
fn default_port_is_stripped_per_scheme() {
    assert_eq!(
        norm("http", Some("a.com:80"), "/").unwrap().as_str(),
        "http://a.com/"
    );
    assert_eq!(
        norm("https", Some("a.com:443"), "/").unwrap().as_str(),
        "https://a.com/"
    );
    assert_eq!(
        norm("http", Some("a.com:443"), "/").unwrap().as_str(),
        "http://a.com:443/"
    );
    assert_eq!(
        norm("http", Some("a.com:8080"), "/").unwrap().port(),
        Some(8080)
    );
    assert_eq!(
        norm("http", Some("a.com:"), "/").unwrap().as_str(),
        "http://a.com/"
    );
    assert_eq!(
        norm("http", Some("a.com:0080"), "/").unwrap().as_str(),
        "http://a.com/"
    );
}

/// Bad ports are typed errors.
#[test]
fn invalid_ports_are_rejected() {
    assert_eq!(norm("http", Some("a.com:65536"), "/"), Err(KeyError::Port));
    assert_eq!(norm("http", Some("a.com:8x"), "/"), Err(KeyError::Port));
    assert_eq!(norm("http", Some("a.com:123456"), "/"), Err(KeyError::Port));
}

/// The absolute form of a DNS name (trailing dot) is the same host.
#[test]
fn trailing_dot_is_stripped() {
    assert_eq!(url_with_host("Example.com."), "http://example.com/");
    assert_eq!(
        norm("http", Some("a.com.."), "/"),
        Err(KeyError::Host("label empty or longer than 63 bytes"))
    );
}

fn url_with_host(h: &str) -> String {
    norm("http", Some(h), "/").unwrap().to_string()
}

/// Host aliases fold to the canonical host, case-insensitively, keeping the port.
#[test]
fn host_aliases_fold() {
    let cfg = KeyConfig {
        host_aliases: vec![("WWW.example.com".into(), "example.com".into())],
        ..KeyConfig::default()
    };
    let uri: Uri = "/x".parse().unwrap();
    let h = HeaderValue::from_static("www.EXAMPLE.com.:8080");
    let u = normalize("http", Some(&h), &uri, &cfg).unwrap();
    assert_eq!(u.as_str(), "http://example.com:8080/x");
    let other = HeaderValue::from_static("blog.example.com");
    let u = normalize("http", Some(&other), &uri, &cfg).unwrap();
    assert_eq!(u.host(), "blog.example.com");
}

/// Hosts must be DNS names or IP literals; raw IDN, percent-encoding, spaces,
/// userinfo (RFC 9110 §4.2.4) and malformed literals are rejected cleanly.
#[test]
fn invalid_hosts_are_rejected() {
    for bad in [
        "exa mple.com",
        "ex%41mple.com",
        "-a.com",
        "a-.com",
        "a..com",
        "user@a.com",
        "[::1",
        "[fe80::1%25eth0]",
        "1.2.3.256",
        "01.2.3.4",
        "a_b.com:1:2",
    ] {
        assert!(
            matches!(
                norm("http", Some(bad), "/"),
                Err(KeyError::Host(_) | KeyError::Port)
            ),
            "{bad}"
        );
    }
    let long_label = format!("{}.com", "a".repeat(64));
    assert!(norm("http", Some(&long_label), "/").is_err());
    let long_name = vec!["a".repeat(60); 5].join(".");
    assert!(norm("http", Some(&long_name), "/").is_err());
    // Raw UTF-8 (an IDN not in xn-- form) cannot even be a str HeaderValue here.
    let idn = HeaderValue::from_bytes("bücher.de".as_bytes()).unwrap();
    let uri: Uri = "/".parse().unwrap();
    assert_eq!(
        normalize("http", Some(&idn), &uri, &KeyConfig::default()),
        Err(KeyError::Host("not ASCII"))
    );
    assert_eq!(
        url_with_host("xn--bcher-kva.de"),
        "http://xn--bcher-kva.de/"
    );
}

/// IP literals: IPv4 kept, IPv6 rendered canonically (RFC 5952 §4).
#[test]
fn ip_literals_are_canonical() {
    assert_eq!(url_with_host("127.0.0.1:8080"), "http://127.0.0.1:8080/");
    assert_eq!(
        url_with_host("[2001:DB8:0:0:0:0:0:1]:80"),
        "http://[2001:db8::1]/"
    );
    assert_eq!(url_with_host("[::1]"), "http://[::1]/");
}

/// RFC 9112 §3.2.3: an absolute-form target's authority wins over Host; a
/// missing or empty Host falls back to the configured default.
#[test]
fn host_source_precedence() {
    assert_eq!(
        norm("http", Some("evil.com"), "http://Good.com/a")
            .unwrap()
            .host(),
        "good.com"
    );
    assert_eq!(
        norm("http", None, "/a").unwrap().as_str(),
        "http://localhost/a"
    );
    assert_eq!(norm("http", Some(""), "/a").unwrap().host(), "localhost");
}

/// The connection's scheme is authoritative, and only http(s) is keyed.
#[test]
fn connection_scheme_is_authoritative() {
    assert_eq!(
        norm("http", None, "https://a.com/").unwrap().as_str(),
        "http://a.com/"
    );
    assert_eq!(norm("ftp", Some("a.com"), "/"), Err(KeyError::Scheme));
}

/// RFC 3986 §6.2.2.2: percent-encoding hex is upper-cased and unreserved octets
/// are decoded; reserved ones (`%2F`) and malformed escapes stay as they are.
#[test]
fn percent_encoding_is_normalised() {
    assert_eq!(url("/%41%62%7e%2d%2E%5F"), "http://example.com/Ab~-._");
    assert_eq!(url("/a%2fb%3a"), "http://example.com/a%2Fb%3A");
    assert_eq!(url("/%e2%82%ac"), "http://example.com/%E2%82%AC");
    assert_eq!(url("/a%zzb%4"), "http://example.com/a%zzb%4");
    assert_eq!(url("/a%"), "http://example.com/a%");
}

/// The path is otherwise byte-exact: case and `+` are kept.
#[test]
fn path_is_byte_exact_otherwise() {
    assert_eq!(
        url("/Blog/Post+One;v=1"),
        "http://example.com/Blog/Post+One;v=1"
    );
    assert_ne!(url("/a/"), url("/a"));
}

/// RFC 3986 §5.2.4: dot segments are removed, also when written as %2E.
#[test]
fn dot_segments_are_removed() {
    assert_eq!(url("/a/b/c/./../../g"), "http://example.com/a/g");
    assert_eq!(url("/mid/content=5/../6"), "http://example.com/mid/6");
    assert_eq!(url("/a/b/.."), "http://example.com/a/");
    assert_eq!(url("/a/."), "http://example.com/a/");
    assert_eq!(url("/../../x"), "http://example.com/x");
    assert_eq!(url("/a/%2e%2E/b"), "http://example.com/b");
    assert_eq!(url("/a/..b/c"), "http://example.com/a/..b/c");
    assert_eq!(url("/.."), "http://example.com/");
}

/// RFC 3986 §5.2.4 examples from §5.4 on the algorithm directly.
#[test]
fn remove_dot_segments_matches_rfc_examples() {
    assert_eq!(remove_dot_segments("/a/b/c/./../../g"), "/a/g");
    assert_eq!(remove_dot_segments("/b/c/."), "/b/c/");
    assert_eq!(remove_dot_segments("/b/c/./g"), "/b/c/g");
    assert_eq!(remove_dot_segments("/b/c/../.."), "/");
    assert_eq!(remove_dot_segments("/b/c/g;x=1/../y"), "/b/c/y");
    assert_eq!(remove_dot_segments("/./a//b"), "/a//b");
}

/// RFC 9110 §4.2.3: an empty path is `/`; asterisk-form has no resource.
#[test]
fn empty_path_is_slash_and_asterisk_is_an_error() {
    assert_eq!(norm("http", None, "http://a.com").unwrap().path(), "/");
    assert_eq!(norm("http", Some("a.com"), "*"), Err(KeyError::Path));
}

/// Tracking parameters are dropped (exact and prefix patterns).
#[test]
fn tracking_params_are_dropped() {
    assert_eq!(
        url("/p?utm_source=x&id=7&gclid=1&utm_medium=y&fbclid=z&msclkid=q"),
        "http://example.com/p?id=7"
    );
    assert_eq!(url("/p?utm_source=news"), "http://example.com/p");
    // Encoded name: normalised before matching.
    assert_eq!(url("/p?utm%5Fsource=x&a=1"), "http://example.com/p?a=1");
    // Case-sensitive, like origins: not a tracking param.
    assert_eq!(url("/p?UTM_source=x"), "http://example.com/p?UTM_source=x");
    // A prefix pattern matches names, not values.
    assert_eq!(url("/p?q=utm_source"), "http://example.com/p?q=utm_source");
}

/// The query is sorted by key; repeated keys keep their order (origins differ
/// on first-wins and last-wins, so reordering them could merge two pages).
#[test]
fn query_sorted_by_key_stably() {
    assert_eq!(url("/p?b=2&a=1&c=3"), "http://example.com/p?a=1&b=2&c=3");
    assert_eq!(url("/p?z=1&a=2&a=1"), "http://example.com/p?a=2&a=1&z=1");
    assert_ne!(url("/p?a=2&a=1"), url("/p?a=1&a=2"));
    assert_eq!(url("/p?a=1&b=2"), url("/p?b=2&a=1"));
}

/// Empty items are dropped, `k` and `k=` differ, and an empty query is none.
#[test]
fn empty_query_items_and_empty_query() {
    assert_eq!(url("/p?&&a=1&"), "http://example.com/p?a=1");
    assert_ne!(url("/p?a"), url("/p?a="));
    assert_eq!(url("/p?"), "http://example.com/p");
    assert_eq!(norm("http", Some("a.com"), "/p?").unwrap().query(), None);
    assert_eq!(url("/p?q=a%2fb%41"), "http://example.com/p?q=a%2FbA");
    assert_eq!(url("/p?q=a+b"), "http://example.com/p?q=a+b");
}

/// RFC 9110 §4.2.5: the fragment never reaches the key.
#[test]
fn fragment_is_dropped() {
    let cfg = KeyConfig::default();
    assert_eq!(
        normalize_absolute("HTTPS://Example.com:443/a/../b?utm_id=1&x=1#frag", &cfg)
            .unwrap()
            .as_str(),
        "https://example.com/b?x=1"
    );
    assert_eq!(
        normalize_absolute("/relative", &cfg),
        Err(KeyError::NotAbsolute)
    );
    assert_eq!(
        normalize_absolute("ftp://a.com/", &cfg),
        Err(KeyError::Scheme)
    );
}

/// Oversized paths and queries are typed errors, at the configured bound.
#[test]
fn url_length_is_bounded() {
    let cfg = KeyConfig {
        path_bytes_max: 16,
        query_bytes_max: 8,
        ..KeyConfig::default()
    };
    let h = HeaderValue::from_static("a.com");
    let ok: Uri = "/123456789012345?12345678".parse().unwrap();
    assert!(normalize("http", Some(&h), &ok, &cfg).is_ok());
    let long_path: Uri = "/1234567890123456".parse().unwrap();
    assert_eq!(
        normalize("http", Some(&h), &long_path, &cfg),
        Err(KeyError::PathTooLong { len: 17, max: 16 })
    );
    let long_query: Uri = "/?123456789".parse().unwrap();
    assert_eq!(
        normalize("http", Some(&h), &long_query, &cfg),
        Err(KeyError::QueryTooLong { len: 9, max: 8 })
    );
    let default_long = format!("/{}", "a".repeat(URL_PART_BYTES_MAX_DEFAULT));
    assert!(matches!(
        norm("http", Some("a.com"), &default_long),
        Err(KeyError::PathTooLong { .. })
    ));
}

/// `path_and_query` is what the fill sends upstream, so it matches the key.
#[test]
fn path_and_query_slices_the_serialized_form() {
    let u = norm("http", Some("a.com:8080"), "/x/../y?b=1&a=2").unwrap();
    assert_eq!(u.path_and_query(), "/y?a=2&b=1");
    assert_eq!(
        norm("http", Some("a.com"), "/y").unwrap().path_and_query(),
        "/y"
    );
}

/// RFC 9111 §4.1 / RFC 9110 §12.5.5: names are lower-cased, de-duplicated and
/// sorted across lines; accept-encoding is set apart.
#[test]
fn vary_is_parsed_and_normalised() {
    let v = vary(&[
        "Accept-Language, Accept-Encoding",
        "cookie,, ACCEPT-language",
    ]);
    assert_eq!(v.fields(), ["accept-language", "cookie"]);
    assert!(v.accept_encoding());
    assert!(!v.is_star());
    assert_eq!(v.to_string(), "accept-encoding, accept-language, cookie");
    assert_eq!(VaryFields::parse([v.to_string().as_bytes()]), v);
    let h = headers(&[("vary", "Origin"), ("vary", "accept-encoding")]);
    assert_eq!(vary_fields(&h).fields(), ["origin"]);
    assert!(vary_fields(&h).accept_encoding());
    assert!(vary_fields(&HeaderMap::new()).is_empty());
}

/// Vary: Accept-Encoding alone keys nothing: encodings are stored variants.
#[test]
fn vary_accept_encoding_alone_is_empty() {
    let v = vary(&["Accept-Encoding"]);
    assert!(v.is_empty());
    assert!(v.accept_encoding());
}

/// RFC 9111 §4.1: `*` is detected as `*`, `, *`, or on a later line.
#[test]
fn vary_star_in_every_spelling() {
    for lines in [
        &["*"][..],
        &[", *"],
        &["accept-language", "*"],
        &["Origin , * ,"],
        &["\t*\t"],
    ] {
        let v = vary(lines);
        assert!(v.is_star(), "{lines:?}");
        assert!(!v.is_empty());
        assert_eq!(v.to_string(), "*");
    }
    assert!(!vary(&["x-star*"]).is_star());
}

/// Invalid names are ignored; too many names count as `*`.
#[test]
fn vary_invalid_names_and_overflow() {
    assert_eq!(vary(&["accept language, \"x\", ok"]).fields(), ["ok"]);
    let many: Vec<String> = (0..=VARY_FIELDS_MAX).map(|i| format!("x-{i}")).collect();
    assert!(vary(&[&many.join(",")]).is_star());
    let exact: Vec<String> = (0..VARY_FIELDS_MAX).map(|i| format!("x-{i}")).collect();
    assert!(!vary(&[&exact.join(","), "X-0"]).is_star());
}

fn base() -> NormalizedUrl {
    norm("https", Some("example.com"), "/page").unwrap()
}

fn vkey(v: &VaryFields, h: &[(&str, &str)]) -> Vec<u8> {
    variant_key(MethodClass::Get, &base(), v, &headers(h))
}

/// RFC 9111 §4.1: the values of named fields select the variant.
#[test]
fn vary_field_values_change_the_key() {
    let v = vary(&["accept-language"]);
    assert_ne!(
        vkey(&v, &[("accept-language", "en")]),
        vkey(&v, &[("accept-language", "de")])
    );
    assert_eq!(
        vkey(&v, &[("accept-language", "en")]),
        vkey(&v, &[("accept-language", "en")])
    );
}

/// RFC 9111 §4.1: an absent header and an empty one are different.
#[test]
fn absent_header_differs_from_empty() {
    let v = vary(&["x-flag"]);
    assert_ne!(vkey(&v, &[]), vkey(&v, &[("x-flag", "")]));
}

/// RFC 9111 §4.1: whitespace and combining lines are normalised; case only where
/// the field defines it (accept-language).
#[test]
fn vary_values_normalised_per_4_1() {
    let v = vary(&["accept-language", "x-custom"]);
    let a = vkey(
        &v,
        &[
            ("accept-language", "en-US, de;q=0.5"),
            ("x-custom", "  A  "),
        ],
    );
    let b = vkey(
        &v,
        &[
            ("accept-language", "EN-us ,,"),
            ("accept-language", " de;Q=0.5"),
            ("x-custom", "A"),
        ],
    );
    assert_eq!(a, b);
    assert_ne!(
        vkey(&v, &[("x-custom", "A")]),
        vkey(&v, &[("x-custom", "a")])
    );
    assert_ne!(
        vkey(&v, &[("x-custom", "a,b")]),
        vkey(&v, &[("x-custom", "a, b")])
    );
    let lines = vkey(&v, &[("x-custom", "a"), ("x-custom", "b")]);
    assert_eq!(lines, vkey(&v, &[("x-custom", "a, b")]));
}

/// Vary: Accept-Encoding never fragments the key; variants are stored per coding.
#[test]
fn accept_encoding_never_changes_the_key() {
    let v = vary(&["accept-encoding, accept-language"]);
    assert_eq!(
        vkey(
            &v,
            &[("accept-encoding", "gzip"), ("accept-language", "en")]
        ),
        vkey(
            &v,
            &[("accept-encoding", "br, zstd"), ("accept-language", "en")]
        )
    );
}

/// A header not named in Vary never changes the key, however hostile.
#[test]
fn unnamed_hostile_headers_never_change_the_key() {
    let v = vary(&["accept-language"]);
    let clean = vkey(&v, &[("accept-language", "en")]);
    let hostile = vkey(
        &v,
        &[
            ("accept-language", "en"),
            ("host", "evil.example"),
            ("x-forwarded-host", "evil.example"),
            ("x-original-url", "/admin"),
            ("x-http-method-override", "POST"),
            ("cookie", "session=abc"),
            ("authorization", "Bearer x"),
            ("accept-encoding", "identity"),
            ("x-accept-language", "de"),
            ("accept-language-x", "de"),
            ("user-agent", "\u{80}bot\t"),
        ],
    );
    assert_eq!(clean, hostile);
    let none = vary(&[]);
    assert_eq!(
        vkey(&none, &[]),
        vkey(&none, &[("cookie", "a=b"), ("host", "x")])
    );
}

/// The encoding is length-prefixed: shifting bytes between parts cannot collide.
#[test]
fn key_encoding_is_unambiguous() {
    let v1 = vary(&["a", "b"]);
    let k1 = vkey(&v1, &[("a", "xb"), ("b", "y")]);
    let k2 = vkey(&v1, &[("a", "x"), ("b", "by")]);
    assert_ne!(k1, k2);
    let v2 = vary(&["ab"]);
    assert_ne!(vkey(&v2, &[("ab", "")]), vkey(&vary(&["a"]), &[("a", "b")]));
    assert_eq!(k1[0], KEY_FORMAT_VERSION);
    // Different URLs, same Vary values: different keys.
    let other = norm("https", Some("example.com"), "/page2").unwrap();
    assert_ne!(
        variant_key(MethodClass::Get, &other, &v1, &HeaderMap::new()),
        vkey(&v1, &[])
    );
}

/// Primary and variant keys never coincide, even with no Vary fields.
#[test]
fn primary_key_differs_from_every_variant_key() {
    let p = primary_key(MethodClass::Get, &base());
    assert_ne!(p, vkey(&vary(&[]), &[]));
    assert_eq!(p, primary_key(MethodClass::Get, &base()));
    assert_eq!(&p[..3], &[KEY_FORMAT_VERSION, b'P', b'G']);
    let star = vary(&["*"]);
    assert_ne!(vkey(&star, &[]), vkey(&vary(&[]), &[]));
}

/// RFC 9110 §9.3.2: HEAD shares GET's entries; other methods have no class.
#[test]
fn head_shares_get_class() {
    assert_eq!(MethodClass::of(&Method::HEAD), Some(MethodClass::Get));
    assert_eq!(MethodClass::of(&Method::GET), Some(MethodClass::Get));
    assert_eq!(MethodClass::of(&Method::POST), None);
}

/// LEB128 lengths for long parts stay unambiguous.
#[test]
fn long_lengths_use_multibyte_prefixes() {
    let mut k = Vec::new();
    put_len(&mut k, 300);
    assert_eq!(k, [0xac, 0x02]);
    assert_eq!(key_hash(b"abc"), key_hash(b"abc"));
    assert_ne!(key_hash(b"abc"), key_hash(b"abd"));
}

proptest! {
    /// An IPv4 host (and any port) keys as the address's canonical text: the host is
    /// kept as sent because what parses is already canonical.
    #[test]
    fn ipv4_hosts_key_as_their_canonical_text(ip in any::<u32>(), port in any::<u16>()) {
        let addr = std::net::Ipv4Addr::from(ip);
        let host = format!("{addr}:{port}");
        let want = if port == 80 {
            format!("http://{addr}/")
        } else {
            format!("http://{addr}:{port}/")
        };
        prop_assert_eq!(url_with_host(&host), want);
    }

    /// Any set of headers not named in Vary leaves the key unchanged.
    #[test]
    fn unnamed_headers_never_change_the_key(
        extra in proptest::collection::vec(("[a-z][a-z0-9-]{0,20}", proptest::collection::vec(any::<u8>(), 0..40)), 0..12)
    ) {
        let v = vary(&["accept-language", "x-device"]);
        let mut h = headers(&[("accept-language", "fr"), ("x-device", "mobile")]);
        let clean = variant_key(MethodClass::Get, &base(), &v, &h);
        for (name, value) in &extra {
            if name == "accept-language" || name == "x-device" {
                continue;
            }
            if let (Ok(n), Ok(val)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_bytes(value)) {
                h.append(n, val);
            }
        }
        prop_assert_eq!(clean, variant_key(MethodClass::Get, &base(), &v, &h));
    }

    /// Normalisation never panics on arbitrary targets and Host bytes, and is
    /// idempotent: normalising a normalised URL changes nothing.
    #[test]
    fn normalize_never_panics_and_is_idempotent(
        target in "/[a-zA-Z0-9%._~!$&'()*+,;=:@/?-]{0,60}",
        host in proptest::collection::vec(any::<u8>(), 0..30),
    ) {
        let Ok(uri) = target.parse::<Uri>() else { return Ok(()); };
        let h = HeaderValue::from_bytes(&host).ok();
        let cfg = KeyConfig::default();
        if let Ok(u) = normalize("http", h.as_ref(), &uri, &cfg) {
            let again = normalize_absolute(u.as_str(), &cfg).unwrap();
            prop_assert_eq!(again.as_str(), u.as_str());
        }
    }

    /// Vary parsing never panics and `*` anywhere is always detected.
    #[test]
    fn vary_parse_is_robust(lines in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..4)) {
        let v = VaryFields::parse(lines.iter().map(Vec::as_slice));
        let mut with_star = lines.clone();
        with_star.push(b" , *".to_vec());
        prop_assert!(VaryFields::parse(with_star.iter().map(Vec::as_slice)).is_star());
        prop_assert!(v.fields().len() <= VARY_FIELDS_MAX);
    }
}

#[test]
fn the_path_fast_path_agrees_with_the_full_normalisation() {
    for p in [
        "/", "/a", "/a/b/c", "/a/", "//a", "/a.b/c.", "/.a/..b/", "/a/./b", "/a/../b", "/..", "/.",
        "/a/.", "/a/..", "/a%2Fb", "/%7e", "/a b", "/über", "/a/.../b", "/a//b",
    ] {
        assert_eq!(
            normalize_path(p).unwrap(),
            remove_dot_segments(&normalize_percent(p)),
            "{p}"
        );
    }
}

#[test]
fn only_the_paths_that_read_their_query_keep_it() {
    let cfg = KeyConfig {
        query_paths: Some(vec!["/search".into(), "/attachments/*".into()]),
        ..KeyConfig::default()
    };
    let n = |t: &str| normalize_absolute(&format!("http://h{t}"), &cfg).unwrap();
    assert_eq!(n("/notes/a?u=1").as_str(), "http://h/notes/a");
    assert_eq!(n("/notes/a?u=1"), n("/notes/a?u=2"));
    assert_eq!(n("/search?q=x").as_str(), "http://h/search?q=x");
    assert_eq!(
        n("/attachments/a.png?v=1").as_str(),
        "http://h/attachments/a.png?v=1"
    );
    assert_eq!(
        n("/searching?q=x").as_str(),
        "http://h/searching",
        "exact unless `*`"
    );
    let all = KeyConfig::default();
    assert_eq!(
        normalize_absolute("http://h/notes/a?u=1", &all)
            .unwrap()
            .as_str(),
        "http://h/notes/a?u=1"
    );
}

#[test]
fn query_rules_keep_what_each_prefix_allows_the_longest_prefix_deciding() {
    let cfg = KeyConfig {
        query_rules: vec![
            ("/".into(), QueryRule::None),
            (
                "/search".into(),
                QueryRule::Only(vec!["q".into(), "page".into()]),
            ),
            ("/api/".into(), QueryRule::All),
        ],
        ..KeyConfig::default()
    };
    let n = |t: &str| {
        normalize_absolute(&format!("http://h{t}"), &cfg)
            .unwrap()
            .as_str()
            .to_owned()
    };
    // Cache busting: every `?x=` is the one page.
    assert_eq!(n("/notes/a?x=1"), "http://h/notes/a");
    assert_eq!(n("/notes/a?x=2&y=3"), "http://h/notes/a");
    // Only the allowed parameters, sorted; `drop_params` still applies.
    assert_eq!(
        n("/search?x=9&q=rust&page=2"),
        "http://h/search?page=2&q=rust"
    );
    assert_eq!(n("/search?q=rust&utm_source=z"), "http://h/search?q=rust");
    assert_eq!(n("/search?x=1"), "http://h/search");
    // The longest prefix wins.
    assert_eq!(n("/api/v1?b=2&a=1"), "http://h/api/v1?a=1&b=2");
    // No rule: everything kept (the default).
    let all = KeyConfig::default();
    assert_eq!(
        normalize_absolute("http://h/p?x=1", &all).unwrap().as_str(),
        "http://h/p?x=1"
    );
}

#[test]
fn a_path_suffix_keeps_the_rest_of_the_url() {
    let cfg = KeyConfig::default();
    let u = normalize_absolute("http://Example.com:8080/a/b?x=1", &cfg).unwrap();
    let md = u.with_path_suffix(".md");
    assert_eq!(md.as_str(), "http://example.com:8080/a/b.md?x=1");
    assert_eq!(md.path(), "/a/b.md");
    assert_eq!(md.path_and_query(), "/a/b.md?x=1");
    let again = normalize_absolute(md.as_str(), &cfg).unwrap();
    assert_eq!(again, md, "still normalised");
    let plain = normalize_absolute("https://h/n", &cfg)
        .unwrap()
        .with_path_suffix(".md");
    assert_eq!(plain.as_str(), "https://h/n.md");
}

#[test]
fn a_negotiated_field_leaves_the_variant_key() {
    let v = VaryFields::parse([&b"Accept, Cookie"[..]]).without("accept");
    assert_eq!(v.fields(), ["cookie"]);
    assert!(VaryFields::parse([&b"Accept"[..]])
        .without("accept")
        .is_empty());
}
