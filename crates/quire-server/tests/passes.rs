//! Passed requests name the host quire keyed them by: the authority of the target
//! (HTTP/2 `:authority`, an HTTP/1.1 absolute-form target) is the `Host` the
//! origin gets, whatever `Host` field the client put beside it.

use quire_testkit::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absolute_form_pass_forwards_its_authority_as_host_not_the_host_field() {
    let o = Origin::start().await;
    o.route("/form", Route::ok("posted", &[]));
    let q = Quire::start(&o, |_| {}).await;
    let req = b"POST http://keyed.example/form HTTP/1.1\r\nHost: other.example\r\n\
                Content-Length: 1\r\nConnection: close\r\n\r\nx";
    let r = raw_async(q.addr, req).await;
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    let seen = o.seen("/form");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].headers["host"], "keyed.example");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_h2_pass_forwards_its_authority_as_host_not_the_host_field() {
    let o = Origin::start().await;
    o.route("/form", Route::ok("posted", &[]));
    let q = Quire::start(&o, |_| {}).await;
    let h2 = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let req = http::Request::post(q.url("/form"))
        .header("host", "other.example")
        .body(http_body_util::Full::new(bytes::Bytes::from_static(b"x")))
        .unwrap();
    let resp = h2.request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let seen = o.seen("/form");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].headers["host"], q.addr.to_string().as_str());
}
