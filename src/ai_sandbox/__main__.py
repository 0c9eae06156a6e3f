from ai_sandbox.entry import main

raise SystemExit(main())
