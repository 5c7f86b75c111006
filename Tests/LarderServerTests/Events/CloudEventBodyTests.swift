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
      let data = EventData(event, resource: resource)
      let binary = CloudEventMessage(
        event: event, resource: resource, mode: .binary, key: [1, 2, 3], timestamp: 9)
      let expected = Array(try Self.encoder.encode(data))
      #expect(binary.body == expected, "\(Self.text(binary.body))\n!=\n\(Self.text(expected))")
      let structured = CloudEventMessage(
        event: event, resource: resource, mode: .structured, key: [1, 2, 3], timestamp: 9)
      let document = Array(try Self.encoder.encode(Document(event, data: data)))
      #expect(structured.body == document, "\(Self.text(structured.body))\n!=\n\(Self.text(document))")
      #expect((event.timeDeleted != nil) == Self.text(binary.body).contains("\"timeDeleted\":"))
    }
  }

  /// The change feed's page: the same documents, in an array, with the cursor after them.
  @Test func theFeedsPageIsWhatJSONEncoderWrites() throws {
    let events = TrickyObjects.all.flatMap(Self.events)
    let next = ObjectEventCursor(transactionOrder: 3, sequence: 9)
    let resource = { (event: ObjectEvent) in GcsObjectResource(event.object, base: Self.base) }
    for page in [Array(events.prefix(0)), Array(events.prefix(1)), events] {
      let written = EventsEndpoint.feedJSON((events: page, next: next), resource: resource)
      let expected = Array(
        try Self.encoder.encode(
          FeedPage(events: page.map { Document($0, data: EventData($0, resource: resource($0))) }, next: next.description)))
      #expect(written == expected, "\(Self.text(written))\n!=\n\(Self.text(expected))")
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

/// What the delivery and feed documents were when `JSONEncoder` wrote them: the oracle the
/// writer's bytes are held to.
private struct EventData: Encodable {
  var resource: GcsObjectResource
  var timeDeleted: String?

  init(_ event: ObjectEvent, resource: GcsObjectResource) {
    self.resource = resource
    timeDeleted = event.timeDeleted.map(StoredObject.timestamp)
  }

  private enum Key: String, CodingKey { case timeDeleted }

  func encode(to encoder: any Encoder) throws {
    try resource.encode(to: encoder)
    var container = encoder.container(keyedBy: Key.self)
    try container.encodeIfPresent(timeDeleted, forKey: .timeDeleted)
  }
}

private struct Document: Encodable {
  var attributes: [(String, String)]
  var data: EventData

  init(_ event: ObjectEvent, data: EventData) {
    attributes = CloudEventMessage.attributes(event)
    self.data = data
  }

  private struct Key: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
  }

  func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: Key.self)
    for (name, value) in attributes { try container.encode(value, forKey: Key(stringValue: name)) }
    try container.encode("application/json", forKey: Key(stringValue: "datacontenttype"))
    try container.encode(data, forKey: Key(stringValue: "data"))
  }
}

private struct FeedPage: Encodable {
  var events: [Document]
  var next: String
}
