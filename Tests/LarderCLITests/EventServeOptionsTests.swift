import Foundation
import LarderTestSupport
import Testing

/// `larder serve --event-*`: the webhook deliverer's settings reach the served process.
@Suite struct EventServeOptionsTests {
  /// `larder events SUBCOMMAND ARGS… --data DIR`.
  static func events(_ box: Sandbox, _ arguments: String...) throws -> RunResult {
    try CLI.larder(["events"] + arguments + ["--data", box.dataPath])
  }

  /// The `events list` line's `pending=N dead=N` of the one subscription.
  static func counts(_ box: Sandbox) throws -> String {
    let list = try Self.events(box, "list")
    #expect(list.status == 0, "\(list)")
    return list.stdout.split(separator: "\t").filter { $0.hasPrefix("pending=") || $0.hasPrefix("dead=") }
      .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.joined(separator: " ")
  }

  @Test func deliveryOffLeavesEventsPendingAndAnotherNodesGiveUpDeadLettersThem() throws {
    let box = try Sandbox()
    // Port 1 on the loopback refuses at once: every attempt fails.
    let subscribed = try Self.events(box, "subscribe", "http://127.0.0.1:1/hook", "--bucket", "app")
    #expect(subscribed.status == 0, "\(subscribed)")

    var idle = try ServedLarder(box, arguments: ["--event-delivery", "off", "--event-give-up", "1s"])
    defer { idle.kill() }
    #expect(try box.put("app/a.txt", Array("a\n".utf8)).status == 0)
    // The node's deliverer would poll within 1 s; give it several.
    sleep(3)
    let pending = try Self.events(box, "pending")
    #expect(pending.stdout.contains("\tapp/a.txt\t"), "\(pending)")
    #expect(pending.stdout.contains("\tattempts=0\t"), "a node with --event-delivery off tried: \(pending)")
    #expect(try Self.counts(box) == "pending=1 dead=0")

    // Another node delivers; with a 1 s give-up the refused delivery is dead after its retry.
    var delivering = try ServedLarder(box, arguments: ["--event-retry-first", "1s", "--event-give-up", "1s"])
    defer { delivering.kill() }
    let deadline = Date().addingTimeInterval(60)
    var seen = try Self.counts(box)
    while seen != "pending=0 dead=1", Date() < deadline {
      usleep(200_000)
      seen = try Self.counts(box)
    }
    #expect(seen == "pending=0 dead=1")
    let dead = try Self.events(box, "dead")
    #expect(dead.stdout.contains("\tapp/a.txt\t"), "\(dead)")
    #expect(!dead.stdout.contains("\tattempts=0\t"), "\(dead)")
  }
}
