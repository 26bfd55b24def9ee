//! `quire-site`: `quire serve`, a vault published as a website. Pages are rendered
//! by an in-process upstream that `quire-server` fills its cache from, so a
//! published page takes the same hit path as a proxied one.
