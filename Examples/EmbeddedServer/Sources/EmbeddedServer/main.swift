import Foundation
import Larder
import LarderServer

// Serve the embedded store over HTTP and download an object from it with the curl command (a
// separate program: URLSession in this process would bring libcurl in).
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

/// The body `curl` downloads from `url`, and its exit status.
func download(_ url: String) throws -> (status: Int32, body: Data) {
  let curl = Process()
  curl.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
  curl.arguments = ["--silent", "--fail", url]
  let output = Pipe()
  curl.standardOutput = output
  try curl.run()
  let body = output.fileHandleForReading.readDataToEndOfFile()
  curl.waitUntilExit()
  return (curl.terminationStatus, body)
}

let answer = try download("http://127.0.0.1:\(service.port)/v0/b/app/o/hello.txt?alt=media")
guard answer.status == 0, answer.body == bytes else {
  FileHandle.standardError.write(Data("embedded server: curl exited \(answer.status) with \(answer.body.count) bytes\n".utf8))
  exit(1)
}
print("embedded server: served \(bytes.count) bytes over HTTP on port \(service.port)")
