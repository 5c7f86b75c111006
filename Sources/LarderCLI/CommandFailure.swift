/// A failure while running: printed as one `larder: error: …` line, exit status 1.
struct CommandFailure: Error, CustomStringConvertible {
  let description: String
  init(_ message: String) { description = message }
}
