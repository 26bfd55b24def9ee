-- wrk script: cycles through the paths in $URLS (one per line, e.g. from a sitemap)
-- with `Accept-Encoding: gzip, br`; adds `Cookie: $QS_COOKIE` when set (a cookie
-- makes quire bypass its cache: every request is rendered).
--   curl -s http://127.0.0.1:8091/sitemap.xml | grep -o '<loc>[^<]*' | sed 's#<loc>http://[^/]*##' > urls.txt
--   URLS=urls.txt taskset -c 1 wrk -t1 -c32 -d10s -s scripts/wrk-urls.lua http://127.0.0.1:8091
local urls = {}
for line in io.lines(os.getenv("URLS") or "urls.txt") do
  if #line > 0 then urls[#urls + 1] = line end
end
local i = 0
local cookie = os.getenv("QS_COOKIE")
request = function()
  i = i % #urls + 1
  local h = { ["Accept-Encoding"] = "gzip, br" }
  if cookie then h["Cookie"] = cookie end
  return wrk.format("GET", urls[i], h)
end
