import LarderHTTP

/// The web console: static files only, served from the binary. Everything the console does
/// goes through the public API with the caller's own token, and through ``ConsoleAPI``'s two
/// calls (the sign-in check, the folder delete) under the same token and rules.
///
/// ```
/// GET /                      302 → /console/
/// GET /console               301 → /console/
/// GET /console/              index.html (Cache-Control: no-cache)
/// GET /console/{hashed name} a CSS or JS file (Cache-Control: public, max-age=31536000, immutable)
/// ```
/// Every answer carries ``contentSecurityPolicy``: scripts and styles from this origin only (no
/// inline script, no eval), images and media from this origin or `blob:` (previews are made from
/// fetched bytes), frames from `blob:` only (PDF previews), nothing may frame the console.
struct ConsoleEndpoint {
  let assets: ConsoleAssets

  static let contentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
    + "media-src 'self' blob:; connect-src 'self'; frame-src blob:; object-src 'none'; base-uri 'none'; "
    + "form-action 'none'; frame-ancestors 'none'"

  func register(in router: inout Router) {
    let assets = assets
    let secure: Router.Decorator = { response, _ in
      response.headers.set("Content-Security-Policy", Self.contentSecurityPolicy)
      response.headers.set("X-Content-Type-Options", "nosniff")
      response.headers.set("Referrer-Policy", "no-referrer")
    }
    router.add("GET", "/", route: "console.root", decorate: secure) { _, _ in
      .respond(Self.redirect(302, to: "/console/"))
    }
    router.add("GET", "/console", route: "console.index", decorate: secure) { request, _ in
      // `/console` is a collection pattern: it also matches `/console/`.
      guard request.path.hasSuffix("/") else { return .respond(Self.redirect(301, to: "/console/")) }
      return .respond(
        HTTPResponse(
          status: 200, headers: ["Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-cache"],
          body: .bytes(assets.index)))
    }
    router.add("GET", "/console/{file}", route: "console.asset", decorate: secure) { _, params in
      guard let name = try? params.decoded("file"), let asset = assets.file(named: name) else {
        return .respond(.error(status: 404, message: "no console file of that name"))
      }
      return .respond(
        HTTPResponse(
          status: 200,
          headers: ["Content-Type": asset.contentType, "Cache-Control": "public, max-age=31536000, immutable"],
          body: .bytes(asset.bytes)))
    }
  }

  private static func redirect(_ status: Int, to location: String) -> HTTPResponse {
    HTTPResponse(status: status, headers: ["Location": location, "Cache-Control": "no-cache"])
  }
}
