/// Bad usage: printed as one `larder: error: …` line and the command's usage, exit status 2.
struct UsageError: Error, CustomStringConvertible {
  let description: String
  init(_ message: String) { description = message }
}
