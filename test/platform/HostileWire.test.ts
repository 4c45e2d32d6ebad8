// Hostile clients against the embedded platform (design: Hostile clients): the suite of test/support/hostileWireSuite.ts.
import { embedded, hostileWireSuite } from "../support/hostileWireSuite.js"

hostileWireSuite("embedded", embedded)
