import Foundation
import LarderHTTP
import LarderTestSupport
import Testing

@testable import Larder
@testable import LarderServer

/// Event bodies and the `objects.get` resource are written without Codable, and receivers see
/// exactly the bytes `JSONEncoder` (sorted keys, slashes bare) wrote before: for both delivery
/// modes, deletes with `timeDeleted`, and objects whose names and metadata are hard to escape.
@Suite struct CloudEventBodyTests {
  static let encoder: JSONEncoder = {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return encoder
  }()

  static let base = "http://127.0.0.1:8080/path"

  /// `object`'s `finalized` and, as a delete or an overwrite records it, its `deleted`.
  static func events(_ object: StoredObject) -> [ObjectEvent] {
    let cursor = ObjectEventCursor(transactionOrder: 0, sequence: 7)
    return [
      ObjectEvent(
        sequence: 7, id: "2f1c0f9e-7a3b-4c1d-9e8f-0a1b2c3d4e5f", kind: .finalized, object: object,
        time: object.updated, timeDeleted: nil, cursor: cursor),
      ObjectEvent(
        sequence: 8, id: "5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d", kind: .deleted, object: object,
        time: object.updated.addingTimeInterval(0.0015),
        timeDeleted: object.updated.addingTimeInterval(0.0015),
        cursor: cursor),
    ]
  }

  static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

  @Test(arguments: TrickyObjects.all)
  func theObjectResourceIsWhatJSONEncoderWrites(_ object: StoredObject) throws {
    let resource = GcsObjectResource(object, base: Self.base)
    var json = JSONWriter(escapingSlashes: false)
    resource.write(to: &json)
    let expected = Array(try Self.encoder.encode(resource))
    #expect(json.bytes == expected, "\(Self.text(json.bytes))\n!=\n\(Self.text(expected))")
  }

  @Test(arguments: TrickyObjects.all)
  func bothModesBodiesAreWhatJSONEncoderWrites(_ object: StoredObject) throws {
    let resource = GcsObjectResource(object, base: Self.base)
    for event in Self.events(object) {
      let data = CloudEventMessage.EventData(event, resource: resource)
      let binary = CloudEventMessage(
        event: event, resource: resource, mode: .binary, key: [1, 2, 3], timestamp: 9)
      let expected = Array(try Self.encoder.encode(data))
      #expect(binary.body == expected, "\(Self.text(binary.body))\n!=\n\(Self.text(expected))")
      let structured = CloudEventMessage(
        event: event, resource: resource, mode: .structured, key: [1, 2, 3], timestamp: 9)
      let document = Array(try Self.encoder.encode(CloudEventMessage.Document(event, data: data)))
      #expect(structured.body == document, "\(Self.text(structured.body))\n!=\n\(Self.text(document))")
      #expect((event.timeDeleted != nil) == Self.text(binary.body).contains("\"timeDeleted\":"))
    }
  }

  /// `objects.get` answers with the same writer; `fields` still filters it.
  @Test func objectsGetAnswersTheWrittenResourceAndFieldsFilterIt() throws {
    let object = try #require(TrickyObjects.all.last)
    let resource = GcsObjectResource(object, base: Self.base)
    let whole = try GcsAPI.json(
      resource, request: try HTTPRequest(method: "GET", target: "/storage/v1/b/app/o/x"))
    guard case .bytes(let body) = whole.body else {
      Issue.record("no body")
      return
    }
    #expect(body == Array(try Self.encoder.encode(resource)))
    #expect(whole.headers["Content-Type"] == "application/json; charset=utf-8")
    let some = try GcsAPI.json(
      resource, request: try HTTPRequest(method: "GET", target: "/storage/v1/b/app/o/x?fields=name,size"))
    guard case .bytes(let part) = some.body else {
      Issue.record("no body")
      return
    }
    let fields = try #require(try JSONSerialization.jsonObject(with: Data(part)) as? [String: String])
    #expect(fields == ["name": object.name, "size": String(object.file.size)])
  }
}
