import Foundation
import Larder
import LarderCrypto

/// One event as an HTTP request in the CloudEvents HTTP binding, signed per Standard Webhooks.
///
/// `data` is the object resource exactly as the GCS JSON API's `objects.get` shapes it (the one
/// encoder, ``GcsObjectResource``), plus `timeDeleted` for `deleted`, as Google sends it.
/// Binary mode puts the attributes in `ce-*` headers and `data` in the body (what Cloud Functions
/// hands `functions-framework`); structured mode sends one `application/cloudevents+json` document.
/// The signature covers `webhook-id.webhook-timestamp.body` with the subscription's key.
struct CloudEventMessage: Equatable {
  var headers: [(name: String, value: String)]
  var body: [UInt8]

  static func == (a: CloudEventMessage, b: CloudEventMessage) -> Bool {
    a.body == b.body && a.headers.map { "\($0.name): \($0.value)" } == b.headers.map { "\($0.name): \($0.value)" }
  }

  init(event: ObjectEvent, resource: GcsObjectResource, mode: EventSubscription.Mode, key: [UInt8], timestamp: Int64) {
    // The bytes `JSONEncoder` (keys sorted, slashes bare) wrote of these documents before they
    // were written without Codable (`CloudEventBodyTests` keeps that encoder as its oracle).
    var json = JSONWriter(escapingSlashes: false, capacity: 1024)
    let timeDeleted = event.timeDeleted.map(StoredObject.timestamp)
    switch mode {
    case .binary:
      resource.write(to: &json, timeDeleted: timeDeleted)
      headers =
        [("Content-Type", "application/json")] + Self.attributes(event).map { ("ce-" + $0.0, Self.headerSafe($0.1)) }
    case .structured:
      Self.writeDocument(event, resource: resource, to: &json)
      headers = [("Content-Type", "application/cloudevents+json; charset=utf-8")]
    }
    body = json.bytes
    let signed = Array("\(event.id).\(timestamp).".utf8) + body
    let signature = Data(HMAC.sha256(key: key, message: signed)).base64EncodedString()
    headers += [("webhook-id", event.id), ("webhook-timestamp", String(timestamp)), ("webhook-signature", "v1,\(signature)")]
  }

  /// The structured-mode document (the attributes, `datacontenttype`, `data`), as a delivery in
  /// structured mode sends it and the change feed lists it.
  static func writeDocument(_ event: ObjectEvent, resource: GcsObjectResource, to json: inout JSONWriter) {
    // "data" sorts before "datacontenttype" and every attribute's name.
    json.beginObject()
    json.key("data")
    resource.write(to: &json, timeDeleted: event.timeDeleted.map(StoredObject.timestamp))
    let members = attributes(event) + [("datacontenttype", "application/json")]
    for (name, value) in members.sorted(by: { $0.0.utf8.lexicographicallyPrecedes($1.0.utf8) }) {
      json.field(name, value)
    }
    json.endObject()
  }

  /// The resource of `event`'s object as objects.get answers it: with its digests, computed
  /// now if the upload did not (the blob of a deleted object may be gone: then without).
  static func resource(_ event: ObjectEvent, larder: Larder, base: String) -> GcsObjectResource {
    var object = event.object
    if let file = try? larder.files.withChecksums(object.file) { object.file = file }
    return GcsObjectResource(object, base: base)
  }

  /// The event's context attributes, as Google sets them for Cloud Storage.
  static func attributes(_ event: ObjectEvent) -> [(String, String)] {
    [
      ("id", event.id), ("source", "//storage.googleapis.com/projects/_/buckets/\(event.object.bucket)"),
      ("specversion", "1.0"), ("type", event.kind.cloudEventType), ("subject", "objects/\(event.object.name)"),
      ("time", StoredObject.timestamp(event.time)),
    ]
  }

  /// A header value per the CloudEvents HTTP binding: non-ASCII and `%` percent-encoded
  /// (an object name may hold any character), so no byte can end or forge a header.
  static func headerSafe(_ value: String) -> String {
    var out = ""
    for byte in value.utf8 {
      if byte >= 0x20 && byte < 0x7f && byte != 0x25 {
        out.unicodeScalars.append(Unicode.Scalar(byte))
      } else {
        out += String(format: "%%%02X", byte)
      }
    }
    return out
  }
}
