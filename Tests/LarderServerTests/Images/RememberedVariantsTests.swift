import Foundation
import Larder
import LarderTestSupport
import Testing

@testable import LarderServer

/// The variants one cached row remembers (``ImageVariantDownload/Remembered``): bounded, so
/// requests for ever other sizes of one hot source cannot grow it.
@Suite struct RememberedVariantsTests {
  @Test func aFullMemoIsEmptiedBeforeTheNextVariantIsKept() throws {
    let larder = try TestStore.temporary()
    let object = try larder.objects.put(bucket: "app", name: "p.bin", data: Data("source".utf8))
    let remembered = ImageVariantDownload.Remembered()
    let capacity = ImageVariantDownload.Remembered.capacity
    for width in 1...capacity {
      remembered.keep(.init(object: object, negotiated: false), params: "w=\(width)")
    }
    #expect(remembered.count == capacity)
    #expect(remembered.variant(params: "w=1")?.object.file.id == object.file.id)
    remembered.keep(.init(object: object, negotiated: true), params: "w=\(capacity + 1)")
    #expect(remembered.count == 1)
    #expect(remembered.variant(params: "w=1") == nil)
    #expect(remembered.variant(params: "w=\(capacity + 1)")?.negotiated == true)
  }
}
