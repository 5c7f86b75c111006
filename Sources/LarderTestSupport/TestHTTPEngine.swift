import Foundation
import LarderHTTP

/// The HTTP engine this test run serves on: `LARDER_HTTP_ENGINE` (`epoll`, `microhttpd`, as
/// `larder serve` reads it), else the default; so every live suite can run on either engine.
public enum TestHTTPEngine {
  public static var selected: HTTPServer.Configuration.Engine {
    ProcessInfo.processInfo.environment["LARDER_HTTP_ENGINE"].flatMap(HTTPServer.Configuration.Engine.init(rawValue:))
      ?? HTTPServer.Configuration().engine
  }
}
