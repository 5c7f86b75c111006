import Foundation

#if canImport(FoundationXML)
  import FoundationXML
#endif

/// An element of an S3 XML answer: name, text, children. S3's documents are small (a listing
/// page of at most 1000 keys), so a tree is simpler than a streaming reader and costs little.
struct S3XMLElement {
  var name: String
  var text = ""
  var children: [S3XMLElement] = []

  /// The first child named `name` (S3's documents use local names; namespaces are ignored).
  func child(_ name: String) -> S3XMLElement? { children.first { $0.name == name } }
  func children(_ name: String) -> [S3XMLElement] { children.filter { $0.name == name } }
  /// The text of the first child named `name`.
  subscript(_ name: String) -> String? { child(name)?.text }

  /// Parses `bytes`; nil when they are not well-formed XML.
  static func parse(_ bytes: [UInt8]) -> S3XMLElement? {
    let builder = TreeBuilder()
    let parser = XMLParser(data: Data(bytes))
    parser.delegate = builder
    guard parser.parse(), let root = builder.root else { return nil }
    return root
  }
}

private final class TreeBuilder: NSObject, XMLParserDelegate {
  var stack: [S3XMLElement] = []
  var root: S3XMLElement?

  func parser(
    _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
    attributes: [String: String] = [:]
  ) {
    let local = elementName.split(separator: ":").last.map(String.init) ?? elementName
    stack.append(S3XMLElement(name: local))
  }

  func parser(_ parser: XMLParser, foundCharacters string: String) {
    guard !stack.isEmpty else { return }
    stack[stack.count - 1].text += string
  }

  func parser(
    _ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?
  ) {
    guard let done = stack.popLast() else { return }
    if stack.isEmpty { root = done } else { stack[stack.count - 1].children.append(done) }
  }
}
