import Foundation
import Larder

/// A note that keeps a file: saving it attaches the file, deleting it releases it.
struct Note: Model {
  var id: String
  var text: String
  var attachment: File?
}

// Stream bytes in, get a File, attach it to a model, read it back: the store alone, no server.
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("embedded-app-\(UUID().uuidString)")
defer { try? FileManager.default.removeItem(at: directory) }
let larder = try Larder(at: directory)
let bytes = Data("kept by an app that links SQLite, libmagic and libcrypto only\n".utf8)
let object = try larder.objects.put(bucket: "app", name: "notes/1.txt", data: bytes)
try larder.models.save(Note(id: "1", text: "hello", attachment: object.file))
let note = try larder.models.find(Note.self, id: "1")
guard let file = note?.attachment, try larder.files.data(of: file, maxSize: 1 << 20) == bytes else {
  FileHandle.standardError.write(Data("embedded app: the attached file did not read back\n".utf8))
  exit(1)
}
print("embedded app: stored, attached and read back \(file.size) bytes (sha256 \(file.sha256.prefix(12))…)")
