import Foundation
import Larder
import LarderServer

#if canImport(Glibc)
  import Glibc
#endif

// Serve the embedded store over HTTP and download an object from it with a plain socket (no
// HTTP client library: URLSession would bring libcurl in).
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("embedded-server-\(UUID().uuidString)")
defer { try? FileManager.default.removeItem(at: directory) }
var options = LarderService.Options(dataDirectory: directory, policy: .allowAll)
options.http.port = 0
options.http.accessLog = .disabled
let service = try LarderService(options: options)
try service.start()
defer { _ = service.stop() }
let bytes = Data("served by an app that links neither libpq nor libcurl\n".utf8)
_ = try service.larder.objects.put(bucket: "app", name: "hello.txt", data: bytes)

func get(_ target: String, port: Int) -> [UInt8] {
  let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
  defer { close(fd) }
  var address = sockaddr_in()
  address.sin_family = sa_family_t(AF_INET)
  address.sin_port = in_port_t(UInt16(port).bigEndian)
  address.sin_addr.s_addr = inet_addr("127.0.0.1")
  let connected = withUnsafePointer(to: &address) {
    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
  }
  guard connected == 0 else { return [] }
  let request = Array("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
  _ = request.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
  var answer: [UInt8] = []
  var chunk = [UInt8](repeating: 0, count: 4096)
  while true {
    let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
    if n <= 0 { break }
    answer += chunk[0..<n]
  }
  return answer
}

let answer = String(decoding: get("/v0/b/app/o/hello.txt?alt=media", port: service.port), as: UTF8.self)
guard answer.hasPrefix("HTTP/1.1 200"), answer.hasSuffix(String(decoding: bytes, as: UTF8.self)) else {
  FileHandle.standardError.write(Data("embedded server: the download answered:\n\(answer.prefix(400))\n".utf8))
  exit(1)
}
print("embedded server: served \(bytes.count) bytes over HTTP on port \(service.port)")
