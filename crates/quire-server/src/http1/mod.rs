//! The HTTP/1.1 floor: fresh hits answered off the socket without hyper
//! ([`fastpath`]; idle keep-alive connections and their hits served by one task per
//! worker in [`hit_loop`]; the heads it takes in [`head`], a hit's answer in [`fresh`], and a
//! head seen before answered without a parse in [`repeat`]), and the writer
//! ([`h1`]) that frames the service's answers on the same connection as hyper
//! would, so a keep-alive connection keeps the fast path.

pub(crate) mod fastpath;
pub(crate) mod fresh;
pub(crate) mod h1;
pub(crate) mod head;
pub(crate) mod hit_loop;
pub(crate) mod repeat;
