// The chaos test (chaos-suite.ts) on the sqlite backend (<dataDir>/drydock.sqlite): the server SIGKILLed at
// random moments, at most one Boat per bot, no blind DELETE, no lost fence, no half-restored workspace.
import { chaosSuite } from "./chaos-suite.js";

chaosSuite("sqlite");
