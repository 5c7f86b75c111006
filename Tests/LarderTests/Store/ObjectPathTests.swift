import Foundation
import LarderTestSupport
import Larder
import Testing

/// Names are validated once, into an `ObjectPath`, and the store's path methods take it as is;
/// an update pinned to a generation refuses a replaced object.
@Suite struct ObjectPathTests {
  @Test func invalidNamesNeverBecomePaths() throws {
    #expect(throws: LarderError.self) { try ObjectPath(bucket: "App", name: "a") }
    #expect(throws: LarderError.self) { try ObjectPath(bucket: "app", name: "a/../b") }
    #expect(throws: LarderError.self) { try ObjectPath(bucket: "app", name: "") }
    let path = try ObjectPath(bucket: "app", name: "users/u1/a.txt")
    #expect(path.description == "app/users/u1/a.txt")
  }

  @Test func pathMethodsReadWriteUpdateAndDeleteTheSameRow() throws {
    let larder = try TestStore.temporary()
    let path = try ObjectPath(bucket: "app", name: "doc.txt")
    let writer = try larder.files.makeWriter()
    try writer.write(Data("one".utf8))
    let put = try larder.objects.put(path, staged: try writer.finish())
    #expect(try larder.objects.find(path)?.generation == put.generation)
    let updated = try larder.objects.update(
      path, patch: ObjectPatch(metadata: ["k": "v"], ifGenerationMatch: put.generation))
    #expect(updated.metadata == ["k": "v"] && updated.metageneration == 2)
    let replaced = try larder.objects.put(bucket: "app", name: "doc.txt", data: Data("two".utf8))
    // An update judged on the first generation does not apply to its replacement.
    #expect(
      throws: LarderError.preconditionFailed(
        "generation is \(replaced.generation), the update required \(put.generation)")
    ) {
      try larder.objects.update(
        path, patch: ObjectPatch(metadata: ["k": "w"], ifGenerationMatch: put.generation))
    }
    #expect(try larder.objects.find(path)?.metadata == [:])
    try larder.objects.delete(path, ifGenerationMatch: replaced.generation)
    #expect(try larder.objects.find(path) == nil)
  }
}
