// The agentbox web app's entry point.
import { render } from "preact";
import "@xterm/xterm/css/xterm.css";
import "./style.css";
import { App } from "./app";

render(<App />, document.getElementById("app")!);
