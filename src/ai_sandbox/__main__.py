from ai_sandbox.main import main

raise SystemExit(main())
