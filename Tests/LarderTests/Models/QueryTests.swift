import Foundation
import LarderTestSupport
import Testing

@testable import Larder

@Suite struct QueryTests {
  static let people = [
    Person(id: "p1", name: "Ada", age: 36, city: "London", tags: ["math"]),
    Person(id: "p2", name: "Alan", age: 41, city: "Manchester", tags: ["crypto", "math"]),
    Person(id: "p3", name: "Grace", age: 85, city: nil, tags: []),
    Person(id: "p4", name: "Barbara", age: 36, city: "Boston", tags: ["db"], active: false),
    Person(id: "p5", name: "Edsger", age: 72, city: "Austin", tags: []),
  ]

  func seeded() throws -> Larder {
    let larder = try TestStore.temporary()
    try larder.models.save(Self.people)
    return larder
  }

  func ids(_ larder: Larder, _ query: Query<Person>) throws -> [String] {
    try larder.models.query(query).map(\.id)
  }

  @Test func comparisonFilters() throws {
    let larder = try seeded()
    let q = Query(Person.self)
    #expect(try ids(larder, q.filter(Field("age") == 36)) == ["p1", "p4"])
    #expect(try ids(larder, q.filter(Field("age") != 36)) == ["p2", "p3", "p5"])
    #expect(try ids(larder, q.filter(Field("age") < 41)) == ["p1", "p4"])
    #expect(try ids(larder, q.filter(Field("age") <= 41)) == ["p1", "p2", "p4"])
    #expect(try ids(larder, q.filter(Field("age") > 72)) == ["p3"])
    #expect(try ids(larder, q.filter(Field("age") >= 72.0)) == ["p3", "p5"])
    #expect(try ids(larder, q.filter(Field("name") == "Grace")) == ["p3"])
    #expect(try ids(larder, q.filter(Field("active") == false)) == ["p4"])
    #expect(try ids(larder, q.filter(Field("tags[0]") == "math")) == ["p1"])
    // A missing field is "not equal" but matches no ordering test.
    #expect(try ids(larder, q.filter(Field("city") != "London")) == ["p2", "p3", "p4", "p5"])
    #expect(try ids(larder, q.filter(Field("city") > "A")) == ["p1", "p2", "p4", "p5"])
  }

  @Test func setStringAndNilFilters() throws {
    let larder = try seeded()
    let q = Query(Person.self)
    #expect(try ids(larder, q.filter(Field("age").isIn([36, 85]))) == ["p1", "p3", "p4"])
    #expect(try ids(larder, q.filter(Field("name").isIn(["Alan", "Nobody"]))) == ["p2"])
    #expect(try ids(larder, q.filter(Field("name").isIn([String]()))) == [])
    #expect(try ids(larder, q.filter(Field("name").hasPrefix("A"))) == ["p1", "p2"])
    #expect(try ids(larder, q.filter(Field("name").hasPrefix("Al"))) == ["p2"])
    #expect(try ids(larder, q.filter(Field("name").hasPrefix("a"))) == [])
    #expect(try ids(larder, q.filter(Field("name").hasPrefix(""))) == ["p1", "p2", "p3", "p4", "p5"])
    // Numbers are not strings, and % or _ are not wildcards.
    #expect(try ids(larder, q.filter(Field("age").hasPrefix("3"))) == [])
    #expect(try ids(larder, q.filter(Field("name").hasPrefix("A%"))) == [])
    #expect(try ids(larder, q.filter(Field("city").contains("ch"))) == ["p2"])
    #expect(try ids(larder, q.filter(Field("name").contains("ar"))) == ["p4"])
    #expect(try ids(larder, q.filter(Field("age").contains("6"))) == [])
    #expect(try ids(larder, q.filter(Field("city").isNil)) == ["p3"])
    #expect(try ids(larder, q.filter(Field("city").isNotNil)) == ["p1", "p2", "p4", "p5"])
    #expect(try ids(larder, q.filter(Field("nonexistent").isNil)) == ["p1", "p2", "p3", "p4", "p5"])
  }

  @Test func combinedFiltersSortAndWindow() throws {
    let larder = try seeded()
    let q = Query(Person.self)
    #expect(try ids(larder, q.filter(Field("age") == 36 || Field("age") > 80)) == ["p1", "p3", "p4"])
    #expect(try ids(larder, q.filter(Field("age") == 36 && !(Field("name") == "Ada"))) == ["p4"])
    #expect(try ids(larder, q.filter(Field("age") >= 36).filter(Field("active") == true)) == ["p1", "p2", "p3", "p5"])
    // Ties on age are broken by the next key, then by id.
    #expect(try ids(larder, q.sorted(by: "age", .descending).sorted(by: "name")) == ["p3", "p5", "p2", "p1", "p4"])
    #expect(try ids(larder, q.sorted(by: "age")) == ["p1", "p4", "p2", "p5", "p3"])
    #expect(try ids(larder, q.sorted(by: "name", .descending)) == ["p3", "p5", "p4", "p2", "p1"])
    #expect(try ids(larder, q.sorted(by: "age").limit(2)) == ["p1", "p4"])
    #expect(try ids(larder, q.sorted(by: "age").limit(2).offset(2)) == ["p2", "p5"])
    #expect(try ids(larder, q.sorted(by: "age").offset(4)) == ["p3"])
    #expect(try ids(larder, q.limit(0)) == [])
    #expect(try larder.models.count(q.filter(Field("age") > 40).limit(1)) == 3)
    #expect(try larder.models.query(q.filter(Field("name") == "Ada")) == [Self.people[0]])
  }

  @Test func hostileFieldPathsAndWindowsAreRejected() throws {
    let larder = try seeded()
    for path in ["", "a..b", ".a", "a.", "a[", "a[x]", "a]", "name') OR 1=1 --", "a b", "$.a", "a[1", "ä"] {
      #expect(throws: ModelError.invalidFieldPath(path)) { try larder.models.query(Query(Person.self).filter(Field(path) == 1)) }
    }
    #expect(throws: ModelError.invalidFieldPath("x'")) { try larder.models.query(Query(Person.self).sorted(by: "x'")) }
    #expect(throws: ModelError.self) { try larder.models.query(Query(Person.self).limit(-1)) }
    #expect(throws: ModelError.self) { try larder.models.query(Query(Person.self).offset(-1)) }
    // Hostile values are only ever bound parameters.
    #expect(try ids(larder, Query(Person.self).filter(Field("name") == "x' OR '1'='1")) == [])
    #expect(try larder.recordCount() == 5)
  }

  @Test func transactionsSeeTheirOwnWritesAndDeleteAtomically() throws {
    let larder = try seeded()
    let seen = try larder.write { tx in
      try tx.save(Person(id: "p6", name: "Niklaus", age: 89))
      try tx.delete(Person.self, id: "p1")
      return (try tx.query(Query(Person.self).filter(Field("age") > 80)).map(\.id), try tx.find(Person.self, id: "p1"))
    }
    #expect(seen.0 == ["p3", "p6"])
    #expect(seen.1 == nil)
    struct Boom: Error {}
    #expect(throws: Boom.self) {
      try larder.write { tx in
        try tx.delete(Person.self, id: "p2")
        throw Boom()
      }
    }
    #expect(try ids(larder, Query(Person.self)) == ["p2", "p3", "p4", "p5", "p6"])
  }

  /// Whether a plan line says the index named `name` is searched: SQLite's `USING INDEX name`,
  /// PostgreSQL's `Index Scan using name` or `Bitmap Index Scan on name` (names cut at 63 bytes).
  func searches(_ plan: [String], _ name: String) -> Bool {
    TestCatalog.isPostgres
      ? plan.map { $0.replacingOccurrences(of: "\"", with: "") }.contains {
        $0.contains("using \(name.prefix(63)) ") || $0.contains("on \(name.prefix(63))")
      }
      : plan.contains { $0.contains("USING INDEX \(name)") }
  }

  /// Whether a plan line scans the whole table: SQLite's `SCAN`, PostgreSQL's `Seq Scan`.
  func scans(_ plan: [String]) -> Bool {
    plan.contains { $0.hasPrefix("SCAN") || $0.contains("Seq Scan") }
  }

  /// 100 000 records of one type: a filtered fetch must search the declared expression index.
  @Test func filteredFetchUsesTheDeclaredIndex() throws {
    let larder = try TestStore.temporary()
    try larder.models.save(Reading(id: "first", sensor: "s-first", value: -1))
    // Bulk-load in one statement so the test stays fast; bodies match what JSONEncoder writes.
    try larder.catalog.write { db in
      if db.dialect == .postgres {
        try db.execute(
          """
          INSERT INTO records(type, id, body, created_at, updated_at)
          SELECT 'Reading', 'r' || lpad(i::text, 6, '0'),
                 jsonb_build_object('id', 'r' || lpad(i::text, 6, '0'), 'sensor', 's' || (i % 1000), 'value', i), 0, 0
          FROM generate_series(0, 99998) AS i
          """)
        // The planner's statistics, as autovacuum would gather them shortly.
        try db.execute("ANALYZE records")
      } else {
        try db.execute(
          """
          WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 99998)
          INSERT INTO records(type, id, body, created_at, updated_at)
          SELECT 'Reading', printf('r%06d', i),
                 json_object('id', printf('r%06d', i), 'sensor', 's' || (i % 1000), 'value', i), 0, 0
          FROM n
          """)
      }
    }
    #expect(try larder.recordCount() == 100_000)

    let bySensor = Query(Reading.self).filter(Field("sensor") == "s42")
    let plan = try larder.models.queryPlan(bySensor)
    let indexName = QuerySQL.indexName(type: "Reading", fields: ["sensor"])
    #expect(searches(plan, indexName), "plan: \(plan)")
    #expect(!scans(plan), "plan: \(plan)")
    let found = try larder.models.query(bySensor)
    #expect(found.count == 100)
    #expect(found.first == Reading(id: "r000042", sensor: "s42", value: 42))
    #expect(found.allSatisfy { $0.sensor == "s42" && $0.value % 1000 == 42 })

    let range = Query(Reading.self).filter(Field("value") >= 99_995).sorted(by: "value", .descending)
    let rangePlan = try larder.models.queryPlan(range)
    #expect(searches(rangePlan, QuerySQL.indexName(type: "Reading", fields: ["value"])), "plan: \(rangePlan)")
    #expect(!scans(rangePlan), "plan: \(rangePlan)")
    #expect(try larder.models.query(range).map(\.value) == [99_998, 99_997, 99_996, 99_995])

    // An unindexed field does scan: the check above is not vacuous.
    let unindexed = try larder.models.queryPlan(Query(Reading.self).filter(Field("id") == "r000001"))
    #expect(
      scans(unindexed) || unindexed.contains { $0.contains("PRIMARY KEY") || $0.contains("records_pkey") },
      "plan: \(unindexed)")
  }
}
